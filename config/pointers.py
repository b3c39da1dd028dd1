"""JSON pointers (RFC 6901), written and read one way, by the jsonpointer library: `~` is
`~0` and `/` is `~1` inside a token. Imports nothing from Django (the diff engine and the
manifest schema use it)."""

from typing import Any

from jsonpointer import JsonPointer, escape, unescape

__all__ = ["escape", "join", "pointer", "tokens"]


def pointer(*parts: Any) -> str:
    """The pointer to `parts` ("" for none)."""
    return JsonPointer.from_parts([str(part) for part in parts]).path


def join(base: str, token: Any) -> str:
    """`base` with one more reference token."""
    return f"{base}/{escape(str(token))}"


def tokens(text: str | None) -> list[str]:
    """The unescaped reference tokens of a pointer; what precedes its first `/` is ignored,
    as the callers always did (a pointer is checked where it enters, not here)."""
    return [unescape(token) for token in (text or "").split("/")[1:]]
