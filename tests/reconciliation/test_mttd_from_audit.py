"""The overview's mean time to detect is what the audit trail says: three push agents report
drift through the API, a real RQ worker finds it, and for each hour the overview's "to detect"
figure (GET /api/v1/dashboard) equals the mean, computed here from the audit entries alone,
of the time from the drifting report (`observation.recorded`) to the finding
(`finding.opened`)."""

import time
from collections import defaultdict
from datetime import timedelta

from audit.models import AuditEntry
from reconciliation.models import Finding
from registry.models import Agent
from tests.conftest import approved_agent, eventually, token_client

NAMES = ["payments-1", "payments-2", "payments-3"]
# The overview measures from the report's stored time to the start of the pass that found it;
# the audit entries are written a moment after each (in the same request, the same pass): a
# tenth of a second on a quiet machine. The drifts here wait seconds for a worker, so a figure
# measured from the wrong moment is off by far more than this.
TOLERANCE_SECONDS = 0.5
# How long the drifts wait in the queue at the least: the worker is started this long after
# the last report (a worker's own start took ~1-3 s, and on a fast machine less than a second,
# too little to tell the report's moment from the pass's).
QUEUED_SECONDS = 2.0


def reported(client, name: str, **extra) -> None:
    desired = client.get(f"/api/v1/agents/{name}/desired-state")
    assert desired.status_code == 200, desired.content
    state = {k: v for k, v in desired.json()["spec"].items() if k != "enforcement"}
    state["tools"] = sorted([*state["tools"], *extra.get("tools", [])])
    response = client.put(f"/api/v1/agents/{name}/observed-state", state, format="json")
    assert response.status_code == 202, response.content


def detection_times_from_the_audit_trail() -> dict[str, list[float]]:
    """Seconds from the report that showed the drift to its finding, by hour ("14:00"), read
    from audit entries only (their times, actions, targets and agents)."""
    found: dict[str, list[float]] = defaultdict(list)
    for opened in AuditEntry.objects.filter(action="finding.opened", agent__in=NAMES):
        if str((opened.after or {}).get("cause", {}).get("key", "")).startswith("rollout"):
            continue  # an approved generation being applied is not drift
        report = (AuditEntry.objects.filter(action="observation.recorded", agent=opened.agent,
                                            at__lte=opened.at).order_by("-at").first())
        assert report is not None, f"no report before {opened.target}"
        hour = opened.at.replace(minute=0, second=0, microsecond=0)
        found[hour.strftime("%H:00")].append((opened.at - report.at).total_seconds())
    return found


def test_the_overview_mttd_equals_the_detection_times_in_the_audit_trail(
        people, start_worker, api_as):
    clients = {}
    for name in NAMES:
        agent = approved_agent(people, name, connector={"type": "push"})
        clients[name] = token_client(people, agent)
        reported(clients[name], name)  # the approved state: in policy, nothing to detect
    worker = start_worker("reconcile", "default")
    eventually(lambda: Agent.objects.filter(name__in=NAMES, status__health="in_policy")
               .count() == len(NAMES),
               message=lambda: f"never converged; worker said:\n{worker.output()}")
    assert not Finding.objects.exists()
    # The drifts wait for a worker, as they would behind a busy queue: seconds to detect, so
    # measuring from the wrong moment (the pass, not the report) cannot pass for right.
    worker.stop()
    for name in NAMES:  # each widens its tools
        reported(clients[name], name, tools=["crm.search"])
    # The one fixed wait: not for a state (there is none to poll) but the queue's delay itself.
    time.sleep(QUEUED_SECONDS)
    worker = start_worker("reconcile", "default")
    eventually(lambda: Finding.objects.filter(agent__name__in=NAMES).values("agent")
               .distinct().count() == len(NAMES),
               message=lambda: f"drift never found; worker said:\n{worker.output()}")

    from_audit = detection_times_from_the_audit_trail()
    assert sum(len(times) for times in from_audit.values()) >= len(NAMES)
    response = api_as(people.dana).get("/api/v1/dashboard").json()["charts"]["response"]
    to_detect = next(trace for trace in response["data"] if trace["name"] == "to detect")
    overview = dict(zip(to_detect["x"], to_detect["y"], strict=True))
    for hour, times in from_audit.items():
        mean = sum(times) / len(times)
        assert mean >= QUEUED_SECONDS  # waited for the worker: seconds, not the pass's milliseconds
        assert overview[hour] is not None, f"the overview shows no MTTD for {hour}"
        assert abs(overview[hour] - mean) <= TOLERANCE_SECONDS, (
            f"{hour}: overview {overview[hour]} s, audit trail {mean:.3f} s from {times}")
    # and the hours without drift show no figure, not an invented one
    assert all(value is None for hour, value in overview.items() if hour not in from_audit)
    assert timedelta(seconds=max(max(t) for t in from_audit.values())) < timedelta(minutes=5)
