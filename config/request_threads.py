"""Django's ASGI handler with each request's thread kept for a later request.

Under ASGI Django runs a request's synchronous part (its middleware, view and the database
work in them) on a thread of the request's own: asgiref's `ThreadSensitiveContext` makes a
one-thread executor per request, and a second thread to join the first when the request
ends. Two threads started and ended per request were ~0.3-0.6 ms of a web process's CPU on
each one (bench/RESULTS.md, 2026-12-07, thirteenth session), the cost of a small request's
whole view. asgiref lets the caller own the executor (`ThreadSensitiveContext(executor=)`):
here a request takes an idle one-thread executor, or a new one, and gives it back when it
ends, as a threaded WSGI server keeps its threads. What a request keeps per thread is kept
per request all the same: Django holds its database connections, time zone, language and
URL configuration in context-local storage, which each request starts empty (its
connection goes back to the pool when it ends).

An executor goes back only when nothing of its request still runs on it: a request cut off
by its client (or cancelled by the server) leaves its view running on the thread, which is
then let go to end on its own instead of making the next request wait behind it. At most
`KEPT` idle threads are kept; the others end."""

import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from asgiref.sync import ThreadSensitiveContext
from django.core.handlers.asgi import ASGIHandler

KEPT = 32  # idle request threads a process keeps (more run while more requests do)


class RequestThread(ThreadPoolExecutor):
    """A one-thread executor that knows whether anything submitted to it is unfinished."""

    def __init__(self) -> None:
        super().__init__(max_workers=1, thread_name_prefix="request")
        self._unfinished = 0
        self._counting = threading.Lock()

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        with self._counting:
            self._unfinished += 1
        try:
            future = super().submit(fn, *args, **kwargs)
        except BaseException:
            self._finished(None)
            raise
        # Registered before asyncio's own callback (run_in_executor wraps the future after
        # submit returns), so the count is down before the awaiting request resumes.
        future.add_done_callback(self._finished)
        return future

    def _finished(self, _future: Future | None) -> None:
        with self._counting:
            self._unfinished -= 1

    @property
    def idle(self) -> bool:
        with self._counting:
            return self._unfinished == 0


class RequestThreads:
    """The idle request threads of a process, taken and given back by the event loop's
    thread alone (no lock: take and give_back never run concurrently)."""

    def __init__(self, kept: int = KEPT) -> None:
        self.kept = kept
        self.idle: list[RequestThread] = []

    def take(self) -> RequestThread:
        return self.idle.pop() if self.idle else RequestThread()

    def give_back(self, thread: RequestThread) -> None:
        if thread.idle and len(self.idle) < self.kept:
            self.idle.append(thread)
        else:
            thread.shutdown(wait=False)  # its thread ends once its work is done


class KeptThreadsASGIHandler(ASGIHandler):
    """ASGIHandler whose requests run their synchronous part on kept threads."""

    def __init__(self) -> None:
        super().__init__()
        self.threads = RequestThreads()

    async def __call__(self, scope: dict, receive: Callable[[], Awaitable[dict]],
                       send: Callable[[dict], Awaitable[None]]) -> None:
        if scope["type"] != "http":
            return await super().__call__(scope, receive, send)  # its refusal
        thread = self.threads.take()
        try:
            async with ThreadSensitiveContext(executor=thread):
                await self.handle(scope, receive, send)
        finally:
            self.threads.give_back(thread)
