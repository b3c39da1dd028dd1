"""Strings a request may carry but PostgreSQL or a UTF-8 body cannot hold: JSON's `\\u0000`
escape decodes to a NUL character (no PostgreSQL text holds one) and its `\\ud800` to a lone
surrogate (no UTF-8 holds one); storing or echoing either was a 500. Imports nothing from
Django."""

from typing import Any

NOT_TEXT = ("must be text a database can store: no NUL character (\\u0000) and no lone "
            "surrogate (like \\ud800)")


def is_text(value: str) -> bool:
    """Whether a string is text PostgreSQL and UTF-8 hold: no NUL, no lone surrogate."""
    if "\x00" in value:
        return False
    if value.isascii():
        return True
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True


def holds_unstorable_text(data: Any) -> bool:
    """Whether a parsed JSON value has a string or a key that is not such text."""
    stack = [data]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            if not is_text(value):
                return True
        elif isinstance(value, dict):
            stack.extend(value.keys())
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return False
