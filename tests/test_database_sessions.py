"""A process's PostgreSQL sessions come from a pool of its own (DATABASE_POOL_SIZE): a web
process answers each request in a thread of its own, and without the pool every request opened
a session (and left it open until the garbage collector found it)."""

import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

from django.db import connection

from tests.conftest import postgresql_only


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
