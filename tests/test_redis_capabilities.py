"""A Redis that cannot run the product is refused where it can be said plainly: /readyz
answers 503 naming what it lacks, and a worker does not start (an older Redis, played here by
a real redis-server with the commands 6.2 added renamed away, as an older one lacks them)."""

import re
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager

import django_rq
import pytest
import redis

from config import embedded_redis
from config.worker import InProcessWorker

NEEDS = "the product needs Redis 6.2 or newer"


@contextmanager
def redis_server(*config: str) -> Iterator[str]:
    """A private redis-server (no persistence) with extra config arguments; yields its URL."""
    port = embedded_redis.free_port()
    server = subprocess.Popen(
        [embedded_redis.server_executable(), "--port", str(port), "--bind", "127.0.0.1",
         "--save", "", "--appendonly", "no", *config],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while not embedded_redis.port_answers("127.0.0.1", port, 0.2):
            assert server.poll() is None and time.monotonic() < deadline, "no redis-server"
            time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        server.terminate()
        server.wait(timeout=30)


def without(*commands: str) -> list[str]:
    return [argument for command in commands for argument in ("--rename-command", command, "")]


def readiness(client, settings, url: str) -> tuple[int, dict]:
    settings.REDIS_URL = url
    response = client.get("/readyz")
    return response.status_code, response.json()


@pytest.mark.django_db
@pytest.mark.parametrize("missing", [("GETEX",), ("LMOVE",), ("GETEX", "LMOVE")])
def test_readyz_refuses_a_redis_without_the_commands_of_6_2(client, settings, missing):
    with redis_server(*without(*missing)) as url:
        status, body = readiness(client, settings, url)
    assert status == 503
    assert body["status"] == "unavailable" and body["checks"]["database"] == "ok"
    assert re.fullmatch(rf"error: this Redis \(version \d+\.\d+\.\d+\) lacks "
                        rf"{', '.join(missing)}: {NEEDS}", body["checks"]["redis"])


@pytest.mark.django_db
def test_readyz_refuses_a_redis_that_will_not_say_which_run_it_is(client, settings):
    """The windows trust what they hold for one server run (its run_id, from INFO): a server
    that hides INFO would fail every batch's window script instead."""
    with redis_server(*without("INFO")) as url:
        status, body = readiness(client, settings, url)
    assert status == 503
    assert body["checks"]["redis"] == f"error: this Redis (version unknown) lacks INFO: {NEEDS}"


@pytest.mark.django_db
def test_readyz_refuses_a_redis_that_does_not_speak_resp3(client, settings):
    with redis_server(*without("HELLO")) as url:  # as Redis 5 and older answer HELLO 3
        status, body = readiness(client, settings, url)
    assert status == 503
    assert body["checks"]["redis"] == f"error: this Redis does not speak RESP3 (HELLO): {NEEDS}"


@pytest.mark.django_db
def test_readyz_refuses_a_redis_whose_access_list_denies_the_commands_the_product_uses(
        client, settings):
    """Not an old server, but the product could not run on it either: not ready."""
    with redis_server("--user", "default", "on", "nopass", "~*", "&*", "+@all",
                      "-getex") as url:
        status, body = readiness(client, settings, url)
    assert status == 503
    assert body["checks"]["redis"].startswith("error: NoPermissionError:")
    assert "getex" in body["checks"]["redis"]


@pytest.mark.django_db
def test_readyz_is_ready_on_a_redis_with_every_command_and_its_probe_writes_nothing(
        client, settings):
    with redis_server() as url:
        status, body = readiness(client, settings, url)
        keys = redis.Redis.from_url(url).dbsize()
    assert (status, body["checks"]["redis"]) == (200, "ok")
    assert keys == 0


@pytest.mark.django_db(transaction=True)
def test_a_worker_does_not_start_on_a_redis_without_blmove_and_leaves_the_jobs_queued():
    with redis_server(*without("LMOVE", "BLMOVE")) as url:
        connection = redis.Redis.from_url(url)
        queue = django_rq.get_queue("ingest", connection=connection, commit_mode="auto")
        queue.enqueue("audit.jobs.checkpoint")
        with pytest.raises(SystemExit) as stopped:
            InProcessWorker([queue], connection=connection).work(burst=True)
        assert re.fullmatch(rf"Worker not started: this Redis \(version \d+\.\d+\.\d+\) lacks "
                            rf"LMOVE: {NEEDS}", str(stopped.value.code))
        assert queue.count == 1


@pytest.mark.django_db(transaction=True)  # the worker closes the connections it finds
def test_a_worker_on_a_redis_with_every_command_runs_its_jobs():
    with redis_server() as url:
        connection = redis.Redis.from_url(url)
        queue = django_rq.get_queue("ingest", connection=connection, commit_mode="auto")
        job = queue.enqueue("math.sqrt", 16)
        InProcessWorker([queue], connection=connection).work(burst=True)
        assert (job.get_status(refresh=True), job.return_value()) == ("finished", 4.0)
