"""A URL whose path or query holds a NUL (`%00`) is refused before any view reads it: no
PostgreSQL text holds one, so a name or filter carrying it reached a query as a 500 (an agent
looked up by `/api/v1/agents/a%00b`). Bytes that are not UTF-8 (a lone surrogate's `%ED%A0%80`)
Django has already turned into text that can be stored."""

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse

from config.api_errors import API_PREFIXES, error_body
from config.unicode_text import NOT_TEXT, is_text

MESSAGE = f"The URL's path and query {NOT_TEXT}."


def url_is_text(request: HttpRequest) -> bool:
    """Whether the request's path and every query key and value is storable text."""
    if not is_text(request.path):
        return False
    return all(is_text(key) and all(is_text(value) for value in values)
               for key, values in request.GET.lists())


class UrlTextMiddleware:
    """400 (the documented JSON error on the API) for a URL that is not such text."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if url_is_text(request):
            return self.get_response(request)
        if request.path.startswith(API_PREFIXES):
            return JsonResponse(error_body(400, MESSAGE), status=400)  # code "malformed"
        return HttpResponseBadRequest(MESSAGE, content_type="text/plain; charset=utf-8")
