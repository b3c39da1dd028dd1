"""Retries within one call are one thing (config/retries.py, tenacity): how many tries, that
what is not worth retrying is raised at once, and that the last failure is what the caller
sees. RQ's own job retries are named there too."""

import time

import pytest

from config import retries


class Flaky(Exception):
    pass


def failing(times: int, tries: list[float]):
    def call() -> str:
        tries.append(time.monotonic())
        if len(tries) <= times:
            raise Flaky(f"try {len(tries)}")
        return "answered"
    return call


def test_a_platform_call_is_tried_three_times_then_its_last_error_is_raised():
    tries: list[float] = []
    with pytest.raises(Flaky, match="^try 3$"):
        retries.connector_call(failing(5, tries), retry_on=Flaky)
    assert len(tries) == 3
    # 0.2 s then 0.4 s, each plus up to as much again of jitter
    assert 0.2 <= tries[1] - tries[0] < 0.4 + 0.2 and 0.4 <= tries[2] - tries[1] < 0.8 + 0.2


def test_a_call_that_recovers_answers():
    tries: list[float] = []
    assert retries.connector_call(failing(2, tries), retry_on=Flaky) == "answered"
    assert len(tries) == 3


def test_an_error_not_worth_retrying_is_raised_on_the_first_try():
    tries: list[float] = []

    def refused() -> None:
        tries.append(time.monotonic())
        raise ValueError("refused")

    with pytest.raises(ValueError, match="refused"):
        retries.connector_call(refused, retry_on=Flaky)
    assert len(tries) == 1


@pytest.mark.parametrize("attempts", [1, 2])
def test_a_siem_batch_is_tried_as_often_as_configured(attempts):
    tries: list[float] = []
    with pytest.raises(Flaky):
        retries.siem_batch(failing(9, tries), retry_on=Flaky, attempts=attempts)
    assert len(tries) == attempts


def test_rq_job_retries_are_named_policies():
    assert (retries.ingest_job().max, retries.ingest_job().intervals) == (5, [1, 2, 5, 15, 60])
    assert (retries.witness_post().max, retries.witness_post().intervals) == (
        5, [1, 5, 30, 120, 600])
