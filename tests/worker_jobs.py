"""Jobs the worker tests enqueue (importable by a real worker process)."""

import signal
import time

from django.db import connection


def backend_pid() -> int:
    """The PostgreSQL backend this worker's connection talks to."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


def fail_mid_query() -> None:
    """A job that fails with its connection in an aborted transaction."""
    connection.set_autocommit(False)
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1/0")


def hang(seconds: float) -> None:
    """A job stuck where RQ's timeout signal cannot reach it."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
    time.sleep(seconds)


def count_cron_run() -> None:
    """A periodic job that only counts that it ran (the cron leader tests)."""
