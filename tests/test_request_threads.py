"""A web process runs each request's synchronous part on a kept thread (config/
request_threads.py): the next request reuses it instead of two threads started and ended per
request, while a thread whose request was cut off mid-view is let go rather than making the
next request wait behind it."""

import asyncio
import json

import pytest

from config.request_threads import KeptThreadsASGIHandler
from tests import request_threads_urls as views

pytestmark = pytest.mark.urls("tests.request_threads_urls")


def scope(path: str) -> dict:
    return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
            "method": "GET", "scheme": "http", "path": path, "raw_path": path.encode(),
            "query_string": b"", "root_path": "", "headers": [(b"host", b"testserver")],
            "client": ("127.0.0.1", 5555), "server": ("testserver", 80)}


async def get(app: KeptThreadsASGIHandler, path: str) -> dict:
    """The JSON answer of a GET through the ASGI app."""
    sent: list[dict] = []
    messages = [{"type": "http.request", "body": b"", "more_body": False}]

    async def receive() -> dict:
        if messages:
            return messages.pop()
        await asyncio.Event().wait()  # the client stays until the answer

    async def send(message: dict) -> None:
        sent.append(message)

    await app(scope(path), receive, send)
    assert sent[0]["status"] == 200, sent
    return json.loads(b"".join(m.get("body", b"") for m in sent[1:]))


@pytest.fixture
def app():
    handler = KeptThreadsASGIHandler()
    yield handler
    for thread in handler.threads.idle:
        thread.shutdown(wait=True)


@pytest.fixture
def held_view():
    views.let_go.clear()
    views.waiting.clear()
    yield
    views.let_go.set()


def test_requests_one_after_another_run_on_one_kept_thread(app):
    async def three() -> list[int]:
        return [(await get(app, "/where"))["thread"] for _ in range(3)]

    threads = asyncio.run(three())
    assert len(set(threads)) == 1
    assert len(app.threads.idle) == 1


def test_requests_at_once_run_on_threads_of_their_own_all_kept_after(app, held_view):
    async def both() -> tuple[dict, dict]:
        first = asyncio.ensure_future(get(app, "/held"))
        await asyncio.to_thread(views.waiting.wait, 30)
        second = await get(app, "/where")  # answered while the first still runs
        views.let_go.set()
        return await first, second

    first, second = asyncio.run(both())
    assert first["thread"] != second["thread"]
    assert len(app.threads.idle) == 2


def test_a_request_cancelled_mid_view_lets_its_thread_go(app, held_view):
    async def cut_off() -> int:
        request = asyncio.ensure_future(get(app, "/held"))
        await asyncio.to_thread(views.waiting.wait, 30)
        request.cancel()  # the server gives up on it; its view still runs
        with pytest.raises(asyncio.CancelledError):
            await request
        assert app.threads.idle == []  # not kept: the next request would wait behind it
        await get(app, "/where")  # not held up by the view still running
        kept = len(app.threads.idle)
        views.let_go.set()  # (asyncio.run waits for the cancelled request's tasks)
        return kept

    assert asyncio.run(cut_off()) == 1
    held_on = views.held_on[-1]
    assert held_on not in app.threads.idle[0]._threads
    held_on.join(30)
    assert not held_on.is_alive()  # it ended with its view instead of waiting for work


def test_idle_threads_beyond_the_limit_end(app, held_view):
    app.threads.kept = 1

    async def both() -> None:
        first = asyncio.ensure_future(get(app, "/held"))
        await asyncio.to_thread(views.waiting.wait, 30)
        second = asyncio.ensure_future(get(app, "/where"))
        await asyncio.sleep(0)
        views.let_go.set()
        await asyncio.gather(first, second)

    asyncio.run(both())
    assert len(app.threads.idle) == 1


@pytest.mark.django_db(transaction=True)
def test_a_kept_thread_gives_each_request_a_working_database_session(app):
    async def twice() -> list[dict]:
        return [await get(app, "/database") for _ in range(2)]

    first, second = asyncio.run(twice())
    assert first["thread"] == second["thread"]
    assert first["one"] == second["one"] == 1
    assert not second["in_atomic_block"]
