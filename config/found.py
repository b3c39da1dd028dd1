"""How an error message names the value it refused: short, and never the whole of a hostile
string. Imports nothing from Django (the manifest schema and the diff engine use it)."""

import datetime as dt
from typing import Any


def described(value: Any) -> str:
    """Describe a found value briefly for an error message."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dt.datetime):
        return f"timestamp {value.isoformat()}"
    if isinstance(value, dt.date):
        return f"date {value.isoformat()}"
    if isinstance(value, str) and len(value) > 60:
        return f"{value[:50]!r}... ({len(value)} characters)"
    text = repr(value) if isinstance(value, str | int | float) else type(value).__name__
    return f"{text[:50]}..." if len(text) > 60 else text
