"""Request bodies for every app's API: JSON through DRF's parser, plus a clean 400 for nesting
deep enough to exhaust the stack and for a string no database text holds; raw text
(manifests, NDJSON events) for the app to parse."""

from typing import Any

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import BaseParser, JSONParser

from config.errors import Malformed, TooLarge
from config.unicode_text import holds_unstorable_text


class SafeJSONParser(JSONParser):
    """`[[[[...]]]]` a hundred thousand deep is malformed input, not a server error."""

    def parse(self, stream: Any, media_type: str | None = None,
              parser_context: dict | None = None) -> Any:
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON parse error - nested too deeply") from None
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
