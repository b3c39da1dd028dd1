"""Vendored browser code (console/vendor/), served by the product itself, never from a CDN:
compressed once in memory, sent gzipped to browsers that accept it, cached for a year under a
URL that names its version."""

import gzip
import hashlib
from functools import cache
from pathlib import Path

from django.http import HttpRequest, HttpResponse, HttpResponseNotModified
from django.utils.cache import patch_vary_headers

VENDOR = Path(__file__).resolve().parent / "vendor"
PLOTLY = "plotly-basic.min.js"


@cache
def _file(name: str) -> tuple[bytes, bytes, str]:
    """(the file, gzipped, its ETag)."""
    body = (VENDOR / name).read_bytes()
    return body, gzip.compress(body, 9, mtime=0), f'"{hashlib.sha256(body).hexdigest()[:32]}"'


def plotly_js(request: HttpRequest) -> HttpResponse:
    """The charts' plotly.js bundle (bars and lines only: the basic build)."""
    body, packed, etag = _file(PLOTLY)
    if request.headers.get("If-None-Match") == etag:
        response = HttpResponseNotModified()
    elif "gzip" in request.headers.get("Accept-Encoding", ""):
        response = HttpResponse(packed, content_type="application/javascript")
        response["Content-Encoding"] = "gzip"
    else:
        response = HttpResponse(body, content_type="application/javascript")
    response["ETag"] = etag
    response["Cache-Control"] = "public, max-age=31536000, immutable"
    patch_vary_headers(response, ["Accept-Encoding"])
    return response
