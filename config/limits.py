"""Request-size limits: an oversize body is refused before anything reads it, a compressed body
is refused while it inflates past the limit, and a body without Content-Length (chunked) is read
whole up to the limit instead of being taken as empty."""

import json
import zlib
from collections.abc import Awaitable, Callable
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse

from config.api_errors import API_PREFIXES, error_body

# Decoders by Content-Encoding token; zlib's wbits: 31 = gzip wrapper, 15 = zlib wrapper.
WBITS = {"gzip": 31, "x-gzip": 31, "deflate": 15}
INFLATE_STEP = 64 * 1024


class BodyRefused(Exception):
    """A body that cannot be taken: `status` and the message the client gets."""

    def __init__(self, status: int, message: str) -> None:
        self.status, self.message = status, message
        super().__init__(message)


def _inflate_one(data: bytes, wbits: int, limit: int) -> bytes:
    """Inflate one layer, never holding more than `limit` bytes of output."""
    out = bytearray()
    pending = data
    while pending:
        # "deflate" is zlib-wrapped per RFC 9110, but some clients send it raw (wbits -15).
        inflater = zlib.decompressobj(wbits)
        try:
            chunk = inflater.decompress(pending, limit + 1 - len(out))
            out += chunk
            while inflater.unconsumed_tail and len(out) <= limit:
                out += inflater.decompress(inflater.unconsumed_tail, limit + 1 - len(out))
            if len(out) > limit:
                raise BodyRefused(413, f"The body inflates past the limit of {limit} bytes.")
            out += inflater.flush(INFLATE_STEP)
        except zlib.error as error:
            if wbits == 15 and not out:
                return _inflate_one(data, -15, limit)
            raise BodyRefused(400, f"The compressed body is corrupt: {error}") from None
        if len(out) > limit:
            raise BodyRefused(413, f"The body inflates past the limit of {limit} bytes.")
        if not inflater.eof:
            raise BodyRefused(400, "The compressed body is truncated.")
        pending = inflater.unused_data if wbits == 31 else b""  # gzip may hold many members
    return bytes(out)


def decode_content(body: bytes, content_encoding: str, limit: int) -> bytes:
    """The body with every listed encoding undone (last applied first), at most `limit` bytes;
    an unknown encoding is a 415, a corrupt one a 400, one inflating past the limit a 413."""
    codings = [c.strip().lower() for c in content_encoding.split(",") if c.strip()]
    unknown = [c for c in codings if c not in WBITS and c != "identity"]
    if unknown:
        raise BodyRefused(415, f"Content-Encoding {unknown[0]!r} is not supported; "
                               "send gzip, deflate or identity.")
    for coding in reversed(codings):
        if coding != "identity":
            body = _inflate_one(body, WBITS[coding], limit)
    return body


class BodySizeLimitMiddleware:
    """413 with the documented JSON error when Content-Length exceeds MAX_BODY_BYTES, and
    Content-Encoding undone here, within the same limit, so every view reads plain bytes."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path.startswith(API_PREFIXES):
            try:
                length = int(request.META.get("CONTENT_LENGTH") or 0)
            except ValueError:
                return JsonResponse(error_body(400, "Content-Length is not a number."),
                                    status=400)
            if "CONTENT_LENGTH" not in request.META and "chunked" in request.META.get(
                    "HTTP_TRANSFER_ENCODING", "").lower():
                # Only a server that hands a chunked body on without its length gets here (the
                # ASGI entry point reads it whole first); Django would read it as empty.
                return JsonResponse(error_body(411, "Send the body with a Content-Length."),
                                    status=411)
            limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
            if length > limit:
                return JsonResponse(
                    error_body(413, f"The body is {length} bytes; the limit is {limit}."),
                    status=413)
            encoding = request.META.pop("HTTP_CONTENT_ENCODING", "")
            if encoding:
                try:
                    body = decode_content(request.body, encoding, limit)
                except BodyRefused as refused:
                    return JsonResponse(error_body(refused.status, refused.message),
                                        status=refused.status)
                # DRF reads request.body again when the stream was consumed; it sizes it by
                # CONTENT_LENGTH, which must now be the decoded length.
                request._body = body
                request.META["CONTENT_LENGTH"] = str(len(body))
        return self.get_response(request)


ASGIApp = Callable[[dict, Callable[[], Awaitable[dict]], Callable[[dict], Awaitable[None]]],
                   Awaitable[None]]


class WholeBodyMiddleware:
    """ASGI: a request without Content-Length (Transfer-Encoding: chunked) is read whole, up to
    MAX_BODY_BYTES, and handed on with its length, since Django and DRF size a body by that
    header and would take it as empty; past the limit it is a 413 without reading on."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Callable[[], Awaitable[dict]],
                       send: Callable[[dict], Awaitable[None]]) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = dict(scope.get("headers") or [])
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        if b"content-length" in headers:
            try:
                too_large = int(headers[b"content-length"]) > limit
            except ValueError:
                too_large = False  # the Django middleware answers 400 for it
            if too_large:
                return await _refuse(send, 413, f"The body is larger than {limit} bytes.")
            return await self.app(scope, receive, send)
        first = await receive()
        if first["type"] != "http.request" or (
                not first.get("more_body") and not first.get("body")
                and b"transfer-encoding" not in headers):
            return await self.app(scope, _replay(first, receive), send)
        body = bytearray(first.get("body", b""))
        message = first
        while message.get("more_body"):
            if len(body) > limit:
                return await _refuse(send, 413, f"The body is larger than {limit} bytes.")
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            body += message.get("body", b"")
        if len(body) > limit:
            return await _refuse(send, 413, f"The body is larger than {limit} bytes.")
        kept = [(k, v) for k, v in scope["headers"] if k != b"transfer-encoding"]
        scope = {**scope, "headers": [*kept, (b"content-length", str(len(body)).encode())]}
        whole = {"type": "http.request", "body": bytes(body), "more_body": False}
        return await self.app(scope, _replay(whole, receive), send)


def _replay(message: dict, receive: Callable[[], Awaitable[dict]]) -> Callable[[], Any]:
    given = [message]

    async def replayed() -> dict:
        return given.pop() if given else await receive()

    return replayed


async def _refuse(send: Callable[[dict], Awaitable[None]], status: int, message: str) -> None:
    """The documented JSON error, sent before Django sees the request, so with the headers
    its security middlewares give every other answer (a JSON body: nothing may load in or
    frame it)."""
    content = json.dumps(error_body(status, message)).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(content)).encode()),
                            (b"connection", b"close"),
                            (b"x-content-type-options", b"nosniff"),
                            (b"x-frame-options", settings.X_FRAME_OPTIONS.encode()),
                            (b"referrer-policy", settings.SECURE_REFERRER_POLICY.encode()),
                            (b"cross-origin-opener-policy",
                             settings.SECURE_CROSS_ORIGIN_OPENER_POLICY.encode()),
                            (b"content-security-policy",
                             b"default-src 'none'; frame-ancestors 'none'")]})
    await send({"type": "http.response.body", "body": content})
