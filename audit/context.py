"""The request id of the work in progress, carried into every audit row it writes."""

import re
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from django.http import HttpRequest, HttpResponse

_request_id: ContextVar[str] = ContextVar("request_id", default="")
_VALID = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")


def current_request_id() -> str:
    """The id of the request or job being served, or '' outside one."""
    return _request_id.get()


@contextmanager
def request_id_scope(request_id: str) -> Iterator[str]:
    """Run a block (a job, a command) under a request id."""
    token = _request_id.set(request_id)
    try:
        yield request_id
    finally:
        _request_id.reset(token)


class RequestIdMiddleware:
    """Take X-Request-ID when it is well-formed, else make one; echo it on the response."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        incoming = request.headers.get("X-Request-ID", "")
        request_id = incoming if _VALID.match(incoming) else uuid.uuid4().hex
        request.request_id = request_id
        with request_id_scope(request_id):
            response = self.get_response(request)
        response["X-Request-ID"] = request_id
        return response
