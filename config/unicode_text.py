"""Strings a request may carry but no database or UTF-8 body holds: JSON's `\\ud800` escape
decodes to a string with a lone surrogate (storing or echoing one was a 500). Imports nothing
from Django."""

from typing import Any

NOT_TEXT = "must be Unicode text: a lone surrogate (like \\ud800) cannot be stored"


def is_text(value: str) -> bool:
    """Whether a string is Unicode text (UTF-8 can hold it)."""
    if value.isascii():
        return True
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True


def holds_a_lone_surrogate(data: Any) -> bool:
    """Whether a parsed JSON value has a string or a key that is not Unicode text."""
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
