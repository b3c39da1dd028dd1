"""What-if for a guardrail before it is turned on: judge every proposal of the last week (the
spec and metadata as proposed, at the time it was proposed) and every agent's observed states
reported that week (what it really ran, with its metadata now) by the guardrail, as proposals
are judged live. Bounded: rows are read in pages of PAGE by id, at most WHATIF_MAX_EVENTS of
each, and the result says when it stopped early."""

from collections import Counter
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from reconciliation.models import ObservedState
from registry.actions.proposals import _verdict
from registry.choices import GuardrailOutcome
from registry.grant_clocks import start_clocks
from registry.models import DesiredStateVersion

DAYS = 7
PAGE = 500
EXAMPLES = 5


def _paged(queryset: Any, cap: int) -> Any:
    """Rows of the queryset by ascending id, a page at a time, at most `cap`."""
    last, seen = 0, 0
    while seen < cap:
        page = list(queryset.filter(pk__gt=last).order_by("pk")[:min(PAGE, cap - seen)])
        if not page:
            return
        for row in page:
            seen += 1
            yield row
        last = page[-1].pk


def _tally(verdicts: list[tuple[str, str, Any, datetime]]) -> dict[str, Any]:
    outcomes = Counter(outcome for _, outcome, _, _ in verdicts)
    flagged = [(agent, outcome, ref, at) for agent, outcome, ref, at in verdicts
               if outcome != GuardrailOutcome.PASSED]
    agents: dict[str, Counter] = {}
    for agent, outcome, _, _ in flagged:
        agents.setdefault(agent, Counter())[outcome] += 1
    return {"judged": len(verdicts),
            "outcomes": {o.value: outcomes.get(o.value, 0) for o in GuardrailOutcome},
            "agents": [{"agent": name, **dict(counts)} for name, counts in sorted(
                agents.items())],
            "examples": [{"agent": agent, "outcome": outcome, "ref": ref, "at": at}
                         for agent, outcome, ref, at in flagged[:EXAMPLES]]}


def guardrail_what_if(guardrail: Any, *, now: datetime | None = None) -> dict[str, Any]:
    """What the guardrail (saved or not: anything with name, expression, selector, effect,
    message, required_approvals) would have said over the last week."""
    now = now or timezone.now()
    since = now - timedelta(days=DAYS)
    cap = settings.WHATIF_MAX_EVENTS
    proposals = DesiredStateVersion.objects.filter(created_at__gte=since, created_at__lte=now
                                                   ).select_related("agent")
    judged = []
    for version in _paged(proposals, cap):
        spec, _ = start_clocks(version.spec, version.created_at)
        verdict = _verdict(guardrail, spec, [{**version.metadata, "name": version.agent.name}],
                           version.created_at)
        if verdict is not None:
            judged.append((version.agent.name, verdict.outcome, version.pk,
                           version.created_at))
    observations = ObservedState.objects.filter(
        agent__isnull=False, observed_at__gte=since, observed_at__lte=now).select_related(
        "agent__owner")
    observed = []
    for row in _paged(observations, cap):
        agent = row.agent
        metadata = {"owner": agent.owner.username, "labels": agent.labels,
                    "description": agent.description, "name": agent.name}
        verdict = _verdict(guardrail, row.state, [metadata], row.observed_at)
        if verdict is not None:
            observed.append((agent.name, verdict.outcome, row.pk, row.observed_at))
    return {"days": DAYS, "since": since, "cap": cap,
            "capped": proposals.count() > cap or observations.count() > cap,
            "proposals": _tally(judged), "observations": _tally(observed)}
