"""What a waiver covers, one rule for every reader (the live pass, the resync, live ingest
and the backtest): a JSON pointer and everything under it. Pure: no ORM."""

import re
from collections.abc import Iterable

# "/tools/crm.search", "/actions/payments.refund/approval_above", "/data/crm"
POINTER = re.compile(r"^(/[^/\s]{1,200}){1,4}$")
POINTER_EXPECTED = ("a JSON pointer into the spec of one to four parts, like /tools/crm.search "
                    "or /actions/payments.refund/approval_above")
AREAS = ("tools", "data", "actions", "limits", "grants", "model", "version", "running",
         "mcp_servers")


def is_waived(waived: Iterable[str], pointer: str) -> bool:
    """Whether a drift or broken rule at `pointer` is waived by one of the waived pointers."""
    return any(pointer == w or pointer.startswith(f"{w}/") for w in waived)
