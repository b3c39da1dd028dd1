"""Request-size limits for the API: an oversize body is refused before anything reads it."""

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse

from config.api_errors import error_body

API_PREFIXES = ("/api/", "/v1/")


class BodySizeLimitMiddleware:
    """413 with the documented JSON error when Content-Length exceeds MAX_BODY_BYTES."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path.startswith(API_PREFIXES):
            try:
                length = int(request.META.get("CONTENT_LENGTH") or 0)
            except ValueError:
                return JsonResponse(error_body(400, "Content-Length is not a number."),
                                    status=400)
            limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
            if length > limit:
                return JsonResponse(
                    error_body(413, f"The body is {length} bytes; the limit is {limit}."),
                    status=413)
        return self.get_response(request)
