"""What a decision request is, and the one place a value a rule needs is read from it.

Pure Python. Every gate that judges an amount (`POST /decisions`, behaviour ingest, the OTLP
mapping) reads it with `read_amount`, so "800" means 800 everywhere and "800 dollars" nowhere;
a request is parsed once into a typed `DecisionRequest` whose unknown fields and wrong types are
refused with the JSON pointer of the field (docs/decisions.md).
"""

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from config import pointers

MAX_AMOUNT = 1e12  # the same ceiling behaviour events have
MAX_WAIT_SECONDS = 86400
MAX_ARGUMENTS_BYTES = 16384
MAX_ARGUMENTS_DEPTH = 8
TEXT_FIELDS = {"tool": 128, "action": 128, "resource": 256, "record": 256, "callback_url": 500}
FIELDS = (*TEXT_FIELDS, "arguments", "amount", "wait_seconds")
# A plain decimal: digits, at most one point with digits after it; no sign, exponent, spaces,
# separators or leading zeros ("800", "800.50", "0.5"; not "-1", "1e3", " 8", "1,000", "08").
_DECIMAL = re.compile(r"(0|[1-9][0-9]{0,12})(\.[0-9]{1,12})?")


class RequestError(ValueError):
    """A decision request that cannot be parsed: which field (a JSON pointer) and why."""

    def __init__(self, pointer: str, message: str) -> None:
        super().__init__(f"{pointer}: {message}")
        self.pointer, self.message = pointer, message


def _pointer(*tokens: str) -> str:
    return pointers.pointer(*tokens)


def read_amount(value: Any) -> float | str:
    """An amount as a float, or why it cannot be read. A JSON number, or a plain decimal string
    ("800", "800.50"), between 0 and 1e12; booleans, NaN, infinities, negatives, other strings
    and objects are unreadable. The only place an amount is converted."""
    if isinstance(value, bool):
        return "a boolean is not an amount"
    if isinstance(value, int) and not 0 <= value <= MAX_AMOUNT:
        return "an amount is a number between 0 and 1e12"  # float() of 10**400 overflows
    if isinstance(value, int | float):
        number = float(value)
    elif isinstance(value, str):
        if not _DECIMAL.fullmatch(value):
            return f"{value[:40]!r} is not a plain decimal number"
        number = float(value)
    else:
        return f"{type(value).__name__ if value is not None else 'null'} is not an amount"
    if not math.isfinite(number) or not 0 <= number <= MAX_AMOUNT:
        return "an amount is a number between 0 and 1e12"
    return number


def _depth(value: Any, limit: int) -> bool:
    """Whether a JSON value nests no deeper than `limit` containers."""
    if isinstance(value, dict | list):
        if limit <= 0:
            return False
        children = value.values() if isinstance(value, dict) else value
        return all(_depth(child, limit - 1) for child in children)
    return True


def _arguments(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise RequestError("/arguments", "expected a JSON object of the call's arguments")
    if not _depth(value, MAX_ARGUMENTS_DEPTH):
        raise RequestError("/arguments", f"nested deeper than {MAX_ARGUMENTS_DEPTH} levels")
    try:
        size = len(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError):
        raise RequestError("/arguments", "expected JSON values only") from None
    if size > MAX_ARGUMENTS_BYTES:
        raise RequestError("/arguments", f"at most {MAX_ARGUMENTS_BYTES} bytes as JSON")
    return value


@dataclass(frozen=True)
class DecisionRequest:
    """One parsed decision request. `action` is the governed action (the tool's name when none
    was named); `amount` is the one amount read from it, or None with `amount_problem` saying
    why (nothing sent, unreadable, or two amounts that disagree)."""

    action: str = ""
    tool: str = ""
    arguments: dict[str, Any] | None = None
    amount: float | None = None
    amount_problem: str = ""
    amounts_disagree: bool = False
    resource: str = ""
    record: str = ""
    wait_seconds: float | None = None
    callback_url: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The request as a decision stores it: what was asked, with the amount as read."""
        stored: dict[str, Any] = {key: getattr(self, key) for key in (
            "action", "tool", "resource", "record") if getattr(self, key)}
        for key in ("arguments", "amount", "wait_seconds"):
            if getattr(self, key) is not None:
                stored[key] = getattr(self, key)
        return stored


def _amount_of(raw: dict[str, Any], arguments: dict[str, Any] | None
               ) -> tuple[float | None, str, bool]:
    """(amount, why it is missing, whether two amounts disagree) from the top-level `amount`
    and `arguments["amount"]`."""
    top = None
    if raw.get("amount") is not None:
        top = read_amount(raw["amount"])
        if isinstance(top, str):
            raise RequestError("/amount", top)
    if arguments is None or "amount" not in arguments:
        if top is not None:
            return top, "", False
        near = sorted(key for key in (arguments or {})
                      if key != "amount" and "amount" in key.lower().replace("_", ""))
        return None, ("no amount was sent" + (f" (arguments has {near[0]!r}, not 'amount')"
                                              if near else "")), False
    argued = read_amount(arguments["amount"])
    if isinstance(argued, str):
        return None, f"arguments/amount cannot be read: {argued}", top is not None
    if top is not None and top != argued:
        return None, f"amount {top:g} and arguments/amount {argued:g} disagree", True
    return argued, "", False


def parse_request(raw: Any) -> DecisionRequest:
    """The typed request, or RequestError naming the first field that is wrong."""
    if not isinstance(raw, dict):
        raise RequestError("", "expected a JSON object")
    for key in raw:
        if key not in FIELDS:
            raise RequestError(_pointer(str(key)), f"unknown field; expected one of "
                               f"{', '.join(FIELDS)}")
    texts = {}
    for key, limit in TEXT_FIELDS.items():
        value = raw.get(key)
        if value is None:
            continue
        if not isinstance(value, str) or not value.strip() or len(value) > limit:
            raise RequestError(_pointer(key), f"expected a non-empty string of at most {limit} "
                               "characters")
        texts[key] = value
    if not any(texts.get(key) for key in ("tool", "action", "resource")):
        raise RequestError("", "name a tool, an action or a resource")
    arguments = _arguments(raw["arguments"]) if raw.get("arguments") is not None else None
    wait = raw.get("wait_seconds")
    # The range first: math.isfinite(10**400) overflows converting it to a float.
    if wait is not None and (isinstance(wait, bool) or not isinstance(wait, int | float)
                             or not 0 < wait <= MAX_WAIT_SECONDS or not math.isfinite(wait)):
        raise RequestError("/wait_seconds", f"expected a number of seconds above 0 and at most "
                           f"{MAX_WAIT_SECONDS}")
    amount, problem, disagree = _amount_of(raw, arguments)
    return DecisionRequest(
        action=texts.get("action") or texts.get("tool", ""), tool=texts.get("tool", ""),
        arguments=arguments, amount=amount, amount_problem=problem, amounts_disagree=disagree,
        resource=texts.get("resource", ""), record=texts.get("record", ""),
        wait_seconds=float(wait) if wait is not None else None,
        callback_url=texts.get("callback_url", ""))
