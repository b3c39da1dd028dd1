"""A web process's PostgreSQL sessions come from a pool of its own (DATABASE_POOL_SIZE): it
answers each request in a thread of its own, and without the pool every request opened a
session (and left it open until the garbage collector found it). Without its database it
answers 503, not 500, to the API and to the console's pages."""

import json
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection

from config import embedded_redis
from tests.conftest import deployed_settings, postgresql_only, start_daphne, stop_daphne


def sessions_opened() -> int:
    """Sessions ever opened on the test database, as PostgreSQL counts them once each new
    session's first transaction ends (read until two reads a second apart agree)."""
    def read() -> int:
        with connection.cursor() as cursor:
            cursor.execute("SELECT sessions FROM pg_stat_database "
                           "WHERE datname = current_database()")
            return cursor.fetchone()[0]

    last = read()
    for _ in range(15):
        time.sleep(1)
        now = read()
        if now == last:
            return now
        last = now
    return last


@postgresql_only
def test_a_web_process_answers_many_requests_on_a_few_sessions(live_server_process):
    def ready(_: int) -> int:
        with urllib.request.urlopen(f"{live_server_process.url}/readyz", timeout=30) as reply:
            return reply.status

    with ThreadPoolExecutor(4) as pool:  # warm: the process's first look at the database
        assert set(pool.map(ready, range(4))) == {200}
    before = sessions_opened()
    with ThreadPoolExecutor(4) as pool:
        assert set(pool.map(ready, range(60))) == {200}
    # Four at a time: at most four sessions more than it held, however many requests.
    assert sessions_opened() - before <= 4


def test_a_web_process_without_its_database_answers_503_and_says_when_to_try_again(
        tmp_path):
    """PostgreSQL down (nothing listens where DATABASE_URL points): an API request waits for a
    session no longer than the pool's wait and answers the documented 503, never a 500."""
    nowhere = f"postgres://postgres@127.0.0.1:{embedded_redis.free_port()}/agentgov"
    # As deployed (DEBUG off: a failure gets the product's page, not Django's debug page).
    server = start_daphne(DATABASE_URL=nowhere, SECURE_SSL_REDIRECT="false",
                          **deployed_settings(tmp_path))
    try:
        for method, path, body in (("GET", "/api/v1/agents", None),
                                   ("POST", "/api/v1/events", b"[]")):
            request = urllib.request.Request(
                f"{server.url}{path}", data=body, method=method,
                headers={"Authorization": "Token not-checked-without-a-database",
                         "Content-Type": "application/json"})
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(request, timeout=60)
            assert refused.value.code == 503, (path, refused.value.read()[:500])
            assert refused.value.headers["Retry-After"] == "5"
            error = json.loads(refused.value.read())["error"]
            assert error["code"] == "unavailable" and "not changed" in error["message"]
        # A signed-in person's page (their session is read before any view runs) and the
        # same through the API: the 503 too, as a page and as the error document.
        for path, shape in (("/agents", "text/html"), ("/api/v1/agents", "application/json")):
            request = urllib.request.Request(f"{server.url}{path}",
                                             headers={"Cookie": "sessionid=some-session"})
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(request, timeout=60)
            assert refused.value.code == 503, (path, refused.value.read()[:500])
            assert refused.value.headers["Retry-After"] == "5"
            assert refused.value.headers["Content-Type"].startswith(shape)
            assert b"database did not answer" in refused.value.read().lower()
    finally:
        stop_daphne(server)
