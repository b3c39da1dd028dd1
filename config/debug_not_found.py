"""The product's own 404 page even under DEBUG (the demo runs with it on).

With DEBUG on, Django answers a 404 with its technical page, which lists every URL pattern of the
control plane: a map for whoever probes the demo, and no help to the person who mistyped a link.
The technical page is the only HTML 404 the product makes under DEBUG (no view renders one of its
own), so this swaps it for the page `handler404` gives with DEBUG off: JSON under the API, the
console's "Page not found" with its links elsewhere."""

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse

from config.api_errors import not_found


class ProductNotFoundMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if (settings.DEBUG and response.status_code == 404
                and response.get("Content-Type", "").startswith("text/html")):
            return not_found(request, None)
        return response
