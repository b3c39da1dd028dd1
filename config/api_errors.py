"""Every API error has one JSON shape: {"error": {"code", "message", "details": [...]}}."""

import logging
import sys
from typing import Any

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template import loader
from django.views.defaults import bad_request as page_bad_request
from django.views.defaults import page_not_found
from django.views.defaults import server_error as page_server_error
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler
from rest_framework.views import set_rollback

from config.errors import DomainError

log = logging.getLogger(__name__)
# How long a client is told to wait when the database could not answer.
DATABASE_RETRY_AFTER_SECONDS = 5
DATABASE_UNAVAILABLE = ("The database did not answer; what it had not committed was not "
                        "changed. Try again shortly.")
# Paths answered with the JSON error document rather than a page.
API_PREFIXES = ("/api/", "/v1/")

CODES = {
    400: "malformed",
    401: "unauthenticated",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    409: "conflict",
    411: "length_required",
    413: "too_large",
    415: "unsupported_media_type",
    422: "invalid",
    429: "rate_limited",
    500: "internal",
    503: "unavailable",
}


def error_body(status_code: int, message: str, details: list[dict[str, str]] | None = None,
               code: str | None = None) -> dict[str, Any]:
    """The documented error document."""
    return {"error": {"code": code or CODES.get(status_code, "error"), "message": message,
                      "details": details or []}}


def _details(data: Any, pointer: str = "") -> list[dict[str, str]]:
    if isinstance(data, dict):
        out: list[dict[str, str]] = []
        for key, value in data.items():
            sub = pointer if key in ("non_field_errors", "detail") else f"{pointer}/{key}"
            out.extend(_details(value, sub))
        return out
    if isinstance(data, list):
        if all(not isinstance(item, dict | list) for item in data):
            return [{"pointer": pointer, "message": str(item)} for item in data]
        out = []
        for index, item in enumerate(data):
            out.extend(_details(item, f"{pointer}/{index}"))
        return out
    return [{"pointer": pointer, "message": str(data)}]


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's handler, reshaped into the documented error document."""
    if isinstance(exc, DomainError):
        return Response(error_body(exc.status, exc.message, exc.details, exc.code),
                        status=exc.status)
    if isinstance(exc, OperationalError | InterfaceError):
        # PostgreSQL unreachable, a web process's sessions all busy past the pool's wait, a
        # session ended under the request. The transaction it was in rolls back; one it
        # committed before (a request of several) stays, so the message claims no more.
        log.warning("database unavailable for %s: %s",
                    getattr(context.get("request"), "path", "?"), exc)
        set_rollback()
        return Response(error_body(503, DATABASE_UNAVAILABLE), status=503,
                        headers={"Retry-After": str(DATABASE_RETRY_AFTER_SECONDS)})
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        details = _details(exc.detail)
        message = details[0]["message"] if len(details) == 1 else "The request is not valid."
        response.data = error_body(response.status_code, message, details)
    else:
        detail = getattr(exc, "detail", str(exc))
        code = getattr(exc, "error_code", None)
        response.data = error_body(response.status_code, str(detail), code=code)
    return response


def _json_error(status_code: int, message: str) -> JsonResponse:
    return JsonResponse(error_body(status_code, message), status=status_code)


def not_found(request: HttpRequest, exception: Exception | None = None) -> Any:
    """404 as JSON under /api/, the normal page elsewhere."""
    if request.path.startswith(API_PREFIXES):
        return _json_error(status.HTTP_404_NOT_FOUND, "Not found.")

    return page_not_found(request, exception)


def server_error(request: HttpRequest) -> Any:
    """500 as JSON under /api/, the normal page elsewhere; 503 (with Retry-After) when what
    failed was the database not answering, outside DRF's handler too (a console page, a
    session read by a middleware)."""
    if _database_unavailable(sys.exc_info()[1]):
        return _database_unavailable_response(request)
    if request.path.startswith(API_PREFIXES):
        return _json_error(500, "Internal error; it has been logged.")

    return page_server_error(request)


def _database_unavailable(error: BaseException | None) -> bool:
    """Whether `error`, or one it was raised from or while handling, is the database not
    answering (each error looked at once: a chain can loop)."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, OperationalError | InterfaceError):
            return True
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return False


def _database_unavailable_response(request: HttpRequest) -> HttpResponse:
    retry = {"Retry-After": str(DATABASE_RETRY_AFTER_SECONDS)}
    if request.path.startswith(API_PREFIXES):
        return JsonResponse(error_body(503, DATABASE_UNAVAILABLE), status=503, headers=retry)
    # Rendered without a request context: the database (sessions, the user) is what failed.
    return HttpResponse(loader.render_to_string("503.html"), status=503, headers=retry)


def bad_request(request: HttpRequest, exception: Exception | None = None) -> Any:
    """400 as JSON under /api/ (e.g. a body over the size limit)."""
    if request.path.startswith(API_PREFIXES):
        return _json_error(400, str(exception) if exception else "Bad request.")

    return page_bad_request(request, exception)
