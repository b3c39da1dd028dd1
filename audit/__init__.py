"""The audit trail. `audit.record(...)` appends one entry inside the caller's transaction."""

from typing import Any


def record(**kwargs: Any) -> Any:
    """Append one audit entry; see audit.actions.record."""
    from audit.actions import record as _record  # the package loads before its models

    return _record(**kwargs)
