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
from config.env import BOOLEAN_WORDS, boolean_word
from config.errors import Malformed

READS = ("GET", "HEAD", "OPTIONS")


def write_parameter_problems(request: HttpRequest, view: Any) -> list[dict[str, str]]:
    """What is wrong with a write's query string for its view: each parameter the view does
    not read, and each it reads that is given more than once (`?dry_run=1&dry_run=0`: which
    was meant cannot be told)."""
    if request.method in READS or not request.GET:
        return []
    taken = getattr(getattr(view, "cls", None), "write_parameters", ())
    expected = (f"expected one of {', '.join(sorted(taken))}" if taken
                else "this write takes no query parameters")
    return [{"pointer": f"/{name}", "message": f"unknown query parameter; {expected}"
             if name not in taken else "given more than once; give it once"}
            for name, values in sorted(request.GET.lists())
            if name not in taken or len(values) > 1]


class WriteParametersMiddleware:
    """400 (the documented JSON error) for a write to the API whose query string its view
    does not read as sent."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_view(self, request: HttpRequest, view: Any, args: Any,
                     kwargs: Any) -> HttpResponse | None:
        if not request.path.startswith(API_PREFIXES):
            return None
        problems = write_parameter_problems(request, view)
        if not problems:
            return None
        first = problems[0]
        message = (f"?{first['pointer'][1:]}: {first['message']}." if len(problems) == 1
                   else "The query string is not what this write reads.")
        return JsonResponse(error_body(400, message, problems), status=400)


def flag(request: Any, name: str) -> bool:
    """A yes-or-no query parameter (absent: no); a value that is neither (`?dry_run`,
    `?dry_run=please`) is a 400 naming it, never read as no: a dry run asked for in a way
    the server did not understand must not run for real."""
    value = request.query_params.get(name)
    if value is None:
        return False
    if (read := boolean_word(value)) is not None:
        return read
    message = f"expected one of {BOOLEAN_WORDS} (any case); got {value[:40]!r}"
    raise Malformed(f"?{name}: {message}.", details=[{"pointer": f"/{name}", "message": message}])
