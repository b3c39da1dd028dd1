"""Dana's overview numbers on crafted history: exact counts and durations, hours with nothing
left as gaps (not 0 s), no negative time to fix, whole-number axes for counts."""

from datetime import UTC, datetime, timedelta

import pytest

from reconciliation.dashboard import summary
from reconciliation.models import Escalation, Finding

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 11, 30, 12, 30, tzinfo=UTC)
HOUR_11 = datetime(2026, 11, 30, 11, 0, tzinfo=UTC)


def finding(agent, n: int, **fields) -> Finding:
    defaults = {"kind": "tool_added", "pointer": f"/tools/t{n}", "severity": "high",
                "area": "tools", "generation": 1, "expected": None, "actual": "x"}
    return Finding.objects.create(agent=agent, fingerprint=f"fp{n}", **{**defaults, **fields})


def series(chart: dict, name: str) -> list:
    return next(trace["y"] for trace in chart["data"] if trace["name"] == name)


@pytest.fixture
def history(refund_agent):
    at = HOUR_11 + timedelta(minutes=10)
    # observed 4 s before a pass found it, verified 30 s after the drift was observed
    finding(refund_agent, 1, observed_at=at - timedelta(seconds=4), detected_at=at,
            status="corrected", corrected_at=at + timedelta(seconds=26))
    # observed 2 s before, verified 10 s after the drift
    finding(refund_agent, 2, observed_at=at - timedelta(seconds=2), detected_at=at,
            status="corrected", corrected_at=at + timedelta(seconds=8), severity="medium")
    # corrected once, then back: the old corrected_at lies before the new occurrence's start
    finding(refund_agent, 3, observed_at=at - timedelta(seconds=6), detected_at=at,
            status="open", occurrence=2, corrected_at=at - timedelta(minutes=20))
    return refund_agent


def test_times_are_measured_from_the_observation_and_never_negative(history):
    response = summary(NOW)["charts"]["response"]
    detect, fix = series(response, "to detect"), series(response, "to verified correction")
    assert detect[-2] == 4.0  # (4 + 2 + 6) / 3
    assert fix[-2] == 20.0  # (30 + 10) / 2: the reopened finding is not fixed yet
    assert all(value is None or value >= 0 for value in detect + fix)


def test_hours_with_no_drift_are_gaps_not_zero_seconds(history):
    response = summary(NOW)["charts"]["response"]
    detect = series(response, "to detect")
    assert detect[:-2] == [None] * 22 and detect[-1] is None


def test_counts_are_whole_numbers_on_whole_number_axes(history):
    drift = summary(NOW)["charts"]["drift"]
    assert series(drift, "found: high")[-2] == 2 and series(drift, "found: medium")[-2] == 1
    assert series(drift, "corrected (verified)")[-2] == 2
    axis = drift["layout"]["yaxis"]
    assert axis["tickformat"] == "d" and axis["dtick"] == 1


def test_escalation_chart_counts_what_the_tile_counts(history):
    for minutes in (1, 2, 30, 600):
        Escalation.objects.create(agent=history, reason="r",
                                  opened_at=NOW - timedelta(minutes=minutes))
    Escalation.objects.create(agent=history, reason="done", status="resolved",
                              opened_at=NOW - timedelta(minutes=1))
    data = summary(NOW)
    bars = data["charts"]["escalations"]["data"][0]
    assert bars["y"] == [2, 1, 1, 0] and sum(bars["y"]) == data["open_escalations"] == 4
    assert data["charts"]["escalations"]["layout"]["yaxis"]["tickformat"] == "d"


def test_hours_before_the_cluster_existed_are_gaps_not_zeros(refund_agent):
    from registry.models import Agent

    Agent.objects.filter(pk=refund_agent.pk).update(created_at=HOUR_11 - timedelta(hours=2))
    drift = summary(NOW)["charts"]["drift"]
    found = series(drift, "found: high")
    assert found[:-4] == [None] * 20  # before the first agent: nothing was measured
    assert found[-4:] == [0, 0, 0, 0]  # measured, and nothing found
