"""A write to the API (POST, PUT, PATCH, DELETE) whose query string names a parameter its view
does not read is refused before the view runs (DESIGN §8, deny by default): `?dry_run=1` on an
endpoint that has no dry run, or `?dryrun=1` on one that has, made the write real. A view names
what its writes read in `write_parameters`; reads (GET) keep their filters' own rules.

Refused before authentication, as a URL that is not text is (config/url_text.py): the answer
says only what the endpoint takes, which its published schema says to anyone."""

from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse

from config.api_errors import API_PREFIXES, error_body
from config.errors import Malformed

READS = ("GET", "HEAD", "OPTIONS")


def unknown_write_parameters(request: HttpRequest, view: Any) -> list[str]:
    """The query parameters of a write that its view does not read, sorted."""
    if request.method in READS or not request.GET:
        return []
    taken = getattr(getattr(view, "cls", None), "write_parameters", ())
    return sorted(set(request.GET) - set(taken))


class WriteParametersMiddleware:
    """400 (the documented JSON error) for a write to the API with a parameter it does not
    read."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_view(self, request: HttpRequest, view: Any, args: Any,
                     kwargs: Any) -> HttpResponse | None:
        if not request.path.startswith(API_PREFIXES):
            return None
        unknown = unknown_write_parameters(request, view)
        if not unknown:
            return None
        taken = getattr(getattr(view, "cls", None), "write_parameters", ())
        expected = (f"expected one of {', '.join(sorted(taken))}" if taken
                    else "this write takes no query parameters")
        details = [{"pointer": f"/{name}", "message": f"unknown query parameter; {expected}"}
                   for name in unknown]
        message = (f"Unknown query parameter {unknown[0]!r}: {expected}." if len(unknown) == 1
                   else "Unknown query parameters.")
        return JsonResponse(error_body(400, message, details), status=400)


TRUE, FALSE = ("1", "true", "yes"), ("0", "false", "no")


def flag(request: Any, name: str) -> bool:
    """A yes-or-no query parameter (absent: no); a value that is neither (`?dry_run`,
    `?dry_run=please`) is a 400 naming it, never read as no: a dry run asked for in a way
    the server did not understand must not run for real."""
    value = request.query_params.get(name)
    if value is None or value.lower() in FALSE:
        return False
    if value.lower() in TRUE:
        return True
    message = f"expected one of {', '.join(TRUE + FALSE)} (any case); got {value[:40]!r}"
    raise Malformed(f"?{name}: {message}.", details=[{"pointer": f"/{name}", "message": message}])
