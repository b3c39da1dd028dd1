"""An agent's compliance timeline: in or out of policy over the last 24 h or 7 days, built from
what changes it (findings opened and closed, suspension), not from reconcile runs, so a
stable converged agent is one solid in-policy span. Exact spans."""

import re
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from audit.models import AuditEntry
from console.reconciliation_pages import compliance_timeline
from reconciliation import actions
from reconciliation.compare import Transition, timeline
from reconciliation.models import ReconcileRun
from sandbox import actions as sandbox_actions
from tests.conftest import BAD_DEPLOYMENT, approved_agent

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
DAY = timedelta(hours=24)
START = NOW - DAY


def at(hours_ago: float) -> datetime:
    return NOW - timedelta(hours=hours_ago)


def spans(segments) -> list[tuple]:
    return [(s.start, s.end, s.in_policy, s.label) for s in segments]


def test_a_stable_converged_agent_is_one_solid_in_policy_span():
    segments = timeline(now=NOW, span=DAY, judged_since=NOW - timedelta(days=30),
                        open_findings=set(), suspended=False, transitions=[])
    assert spans(segments) == [(START, NOW, True, "in policy")]
    assert segments[0].share == 1.0


def test_a_corrected_drift_is_out_of_policy_from_detected_to_verified():
    segments = timeline(now=NOW, span=DAY, judged_since=at(100), open_findings=set(),
                        suspended=False, transitions=[
                            Transition(at(5), "finding.opened", "finding:7"),
                            Transition(at(5), "finding.opened", "finding:8"),
                            Transition(at(4.5), "finding.corrected", "finding:7", "correcting"),
                            Transition(at(4), "finding.corrected", "finding:8", "correcting")])
    assert spans(segments) == [(START, at(5), True, "in policy"),
                               (at(5), at(4), False, "drifted"),
                               (at(4), NOW, True, "in policy")]
    assert [round(s.share, 4) for s in segments] == [round(19 / 24, 4), round(1 / 24, 4),
                                                     round(4 / 24, 4)]


def test_an_open_drift_is_out_of_policy_until_now_and_one_from_before_the_window_too():
    still_open = timeline(now=NOW, span=DAY, judged_since=at(100), open_findings={3},
                          suspended=False,
                          transitions=[Transition(at(2), "finding.opened", "finding:3")])
    assert spans(still_open) == [(START, at(2), True, "in policy"),
                                 (at(2), NOW, False, "drifted")]
    older = timeline(now=NOW, span=DAY, judged_since=at(100), open_findings=set(),
                     suspended=False, transitions=[
                         Transition(at(30), "finding.opened", "finding:3"),
                         Transition(at(1), "finding.corrected", "finding:3", "correcting")])
    assert spans(older) == [(START, at(1), False, "drifted"), (at(1), NOW, True, "in policy")]


def test_drift_allowed_by_mode_log_counts_as_in_policy_once_logged():
    segments = timeline(now=NOW, span=DAY, judged_since=at(100), open_findings=set(),
                        suspended=False, transitions=[
                            Transition(at(6), "finding.opened", "finding:4"),
                            Transition(at(5), "finding.logged", "finding:4", "open"),
                            Transition(at(1), "finding.resolved", "finding:4", "logged")])
    assert spans(segments) == [(START, at(6), True, "in policy"),
                               (at(6), at(5), False, "drifted"),
                               (at(5), NOW, True, "in policy")]


def test_a_suspension_is_out_of_policy_until_resumed():
    segments = timeline(now=NOW, span=DAY, judged_since=at(100), open_findings=set(),
                        suspended=False, transitions=[
                            Transition(at(8), "finding.opened", "finding:5"),
                            Transition(at(8), "agent.suspended", "agent:a"),
                            Transition(at(3), "finding.resolved", "finding:5", "blocked"),
                            Transition(at(3), "agent.resumed", "agent:a")])
    assert spans(segments) == [(START, at(8), True, "in policy"),
                               (at(8), at(3), False, "suspended"),
                               (at(3), NOW, True, "in policy")]


def test_an_accepted_drift_counts_until_its_proposal_is_decided():
    segments = timeline(now=NOW, span=DAY, judged_since=at(100), open_findings=set(),
                        suspended=False, transitions=[
                            Transition(at(9), "finding.opened", "finding:6"),
                            Transition(at(2), "finding.reopened", "finding:6", "accepted"),
                            Transition(at(2), "finding.resolved", "finding:6", "open")])
    assert spans(segments) == [(START, at(9), True, "in policy"),
                               (at(9), at(2), False, "drifted"),
                               (at(2), NOW, True, "in policy")]


def test_before_the_first_pass_nothing_is_known():
    assert spans(timeline(now=NOW, span=DAY, judged_since=None, open_findings=set(),
                          suspended=False, transitions=[])) == [
        (START, NOW, None, "not reconciled yet")]
    assert spans(timeline(now=NOW, span=DAY, judged_since=at(2), open_findings=set(),
                          suspended=False, transitions=[])) == [
        (START, at(2), None, "not reconciled yet"), (at(2), NOW, True, "in policy")]


@pytest.mark.django_db
def test_a_real_agent_converged_long_ago_with_no_runs_since_is_in_policy(people):
    agent = approved_agent(people, "steady-agent", enforcement={"default": "correct"})
    actions.reconcile_agent(agent.pk, trigger="approved")
    assert actions.converged_check([agent.pk]) == []  # resyncs that write no run
    # Two days on, nothing has changed and no pass has written a run for a day and more.
    later = timezone.now() + timedelta(days=2)
    assert not ReconcileRun.objects.filter(started_at__gte=later - DAY).exists()
    assert spans(compliance_timeline(agent, later, DAY)) == [
        (later - DAY, later, True, "in policy")]


@pytest.mark.django_db
def test_a_real_drift_is_out_of_policy_from_detected_to_verified(people, client):
    agent = approved_agent(people, "refund-agent", enforcement={"default": "correct"})
    actions.reconcile_agent(agent.pk, trigger="approved")
    first_pass = ReconcileRun.objects.get(agent=agent).started_at
    sandbox_actions.sandbox_deploy(agent, actor="system:test", changes=BAD_DEPLOYMENT, reason="bad")
    actions.reconcile_agent(agent.pk, trigger="observation")  # detects, corrects, verifies
    trail = AuditEntry.objects.filter(agent=agent.name)
    detected = min(trail.filter(action="finding.opened").values_list("at", flat=True))
    verified = max(trail.filter(action="finding.corrected").values_list("at", flat=True))
    now = timezone.now()
    assert spans(compliance_timeline(agent, now, DAY)) == [
        (now - DAY, first_pass, None, "not reconciled yet"),
        (first_pass, detected, True, "in policy"),
        (detected, verified, False, "drifted"),
        (verified, now, True, "in policy")]
    client.force_login(people.bob)
    page = client.get("/agents/refund-agent/?timeline=7d").content.decode()
    assert "Compliance timeline (last 7 days)" in page
    # human times, the exact ones on hover
    assert re.search(
        rf'✖ out of policy \(drifted\) from <time datetime="[^"]+" '
        rf'title="{detected:%Y-%m-%d %H:%M:%S} UTC">[^<]+</time> to <time datetime="[^"]+" '
        rf'title="{verified:%Y-%m-%d %H:%M:%S} UTC">', page)
