"""With no REDIS_URL (a newcomer's laptop), the suite runs on the embedded redis-server: started
before pytest-django imports the settings, stopped when the run ends if this run started it.

Under pytest-xdist each worker takes a Redis database of its own (the run's database number
plus the worker's), as pytest-django gives each its own test database: tests empty their
Redis, and one worker's flush must not take another's queues and windows."""

import os
from urllib.parse import urlsplit, urlunsplit

import pytest

from config import embedded_redis
from config.private_files import var_dir

_started: list[str] = []
REDIS_DATABASES = 16  # redis-server's default `databases`


def worker_redis_url(url: str, worker: str | None) -> str:
    """`url` moved to the database of xdist worker `worker` ("gw0", "gw1", ...); unchanged
    outside xdist. A run of more workers than databases left fails here, with the reason."""
    if not worker:
        return url
    parts = urlsplit(url)
    base = parts.path.strip("/") or "0"
    if parts.scheme not in ("redis", "rediss") or not base.isdigit() or parts.query:
        # a unix socket or a `?db=` query: the worker's database cannot be set in the path
        raise pytest.UsageError(
            f"cannot give each xdist worker a Redis database of its own in {url!r}: use "
            "redis://host:port/N, or run in one process (-n 0)")
    number = int(base) + int(worker.removeprefix("gw"))
    if number >= REDIS_DATABASES:
        raise pytest.UsageError(
            f"xdist worker {worker} needs Redis database {number}, past the last one "
            f"({REDIS_DATABASES - 1}): run fewer workers or point REDIS_URL at a lower database")
    return urlunsplit(parts._replace(path=f"/{number}"))


@pytest.hookimpl(wrapper=True)
def pytest_load_initial_conftests(early_config, parser, args):
    # A wrapper runs before pytest-django's own (tryfirst) hook reads the settings. An xdist
    # worker inherits the controller's REDIS_URL (the controller ran this first).
    if not os.environ.get("REDIS_URL"):
        url, started = embedded_redis.ensure_running(var_dir() / "redis")
        os.environ["REDIS_URL"] = url
        if started:
            _started.append(url)
    os.environ["REDIS_URL"] = worker_redis_url(os.environ["REDIS_URL"],
                                               os.environ.get("PYTEST_XDIST_WORKER"))
    return (yield)


def pytest_unconfigure(config):
    if _started:
        embedded_redis.stop_running(var_dir() / "redis")
        _started.clear()
