"""A URL configuration for tests/test_request_threads.py: views that say which thread ran
them, one that waits until the test lets it go, and one that uses the database."""

import itertools
import threading

from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.urls import path

let_go = threading.Event()
waiting = threading.Event()
_serials = itertools.count(1)
_this_thread = threading.local()


def thread_serial() -> int:
    """A number of the thread running the view, never given to another thread (a thread's
    ident is reused by the next thread once it ends)."""
    if not hasattr(_this_thread, "serial"):
        _this_thread.serial = next(_serials)
    return _this_thread.serial


def where(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"thread": thread_serial()})


held_on: list[threading.Thread] = []  # the threads that ran `held`


def held(request: HttpRequest) -> JsonResponse:
    held_on.append(threading.current_thread())
    waiting.set()
    let_go.wait(60)
    return JsonResponse({"thread": thread_serial()})


def database(request: HttpRequest) -> JsonResponse:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        return JsonResponse({"thread": thread_serial(), "one": cursor.fetchone()[0],
                             "in_atomic_block": connection.in_atomic_block})


urlpatterns = [path("where", where), path("held", held), path("database", database)]
