"""Request bodies for every app's API: JSON through DRF's parser, plus a clean 400 for nesting
deep enough to exhaust the stack and for a string no database text holds; raw text
(manifests, NDJSON events) for the app to parse."""

import codecs
from typing import Any

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import BaseParser, JSONParser, get_encoding
from rest_framework.utils import json

from config.errors import Malformed, TooLarge
from config.unicode_text import holds_unstorable_text


def _object_once(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose every key appears once: `{"amount": 10, "amount": 100000}` means
    the first to one reader and the last to another (Python's takes the last), so which was
    meant cannot be told; a manifest refuses the same in YAML."""
    found = dict(pairs)
    if len(found) != len(pairs):
        seen: set[str] = set()
        twice = next(key for key, _ in pairs if key in seen or seen.add(key))
        raise ValueError(f"the key {twice[:60]!r} appears twice in one object")
    return found


class SafeJSONParser(JSONParser):
    """`[[[[...]]]]` a hundred thousand deep is malformed input, not a server error; so is an
    object that names a key twice."""

    def parse(self, stream: Any, media_type: str | None = None,
              parser_context: dict | None = None) -> Any:
        encoding = get_encoding(parser_context or {})
        try:
            data = json.load(codecs.getreader(encoding)(stream), object_pairs_hook=_object_once,
                             parse_constant=json.strict_constant if self.strict else None)
        except RecursionError:
            raise ParseError("JSON parse error - nested too deeply") from None
        except ValueError as error:
            raise ParseError(f"JSON parse error - {error}") from None
        if holds_unstorable_text(data):
            raise ParseError("JSON parse error - a string holds a NUL character (\\u0000) or a "
                             "lone surrogate (like \\ud800), which no database text holds")
        return data


def decode_body(body: bytes) -> str:
    """UTF-8 text of a body; anything else is malformed."""
    if len(body) > settings.DATA_UPLOAD_MAX_MEMORY_SIZE:
        raise TooLarge(f"The body is larger than {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes.")
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as error:
        raise Malformed(f"The body is not UTF-8 (byte {error.start}).") from None


class TextParser(BaseParser):
    """Any body as UTF-8 text (YAML or JSON manifests, NDJSON events); the app parses it."""

    media_type = "*/*"

    def parse(self, stream: Any, media_type: str | None = None,
              parser_context: dict | None = None) -> str:
        return decode_body(stream.read() if stream is not None else b"")
