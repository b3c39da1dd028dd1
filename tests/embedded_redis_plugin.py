"""With no REDIS_URL (a newcomer's laptop), the suite runs on the embedded redis-server: started
before pytest-django imports the settings, stopped when the run ends if this run started it."""

import os

import pytest

from config import embedded_redis
from config.private_files import var_dir

_started: list[str] = []


@pytest.hookimpl(wrapper=True)
def pytest_load_initial_conftests(early_config, parser, args):
    # A wrapper runs before pytest-django's own (tryfirst) hook reads the settings.
    if not os.environ.get("REDIS_URL"):
        url, started = embedded_redis.ensure_running(var_dir() / "redis")
        os.environ["REDIS_URL"] = url
        if started:
            _started.append(url)
    return (yield)


def pytest_unconfigure(config):
    if _started:
        embedded_redis.stop_running(var_dir() / "redis")
        _started.clear()
