"""A finding's status changes only through `Finding.transition`: the allowed moves are one
table (FINDING_TRANSITIONS), a move outside it is refused, and no module outside the models
writes a finding's status by hand."""

import ast
from pathlib import Path

import pytest

from reconciliation.choices import FINDING_TRANSITIONS, FindingStatus
from reconciliation.models import Finding, IllegalTransition
from tests.conftest import ROOT, refund_manifest

S = FindingStatus
ALLOWED = sorted((was, to) for was, targets in FINDING_TRANSITIONS.items() for to in targets)
REFUSED = sorted((was, to) for was in S for to in S if to not in FINDING_TRANSITIONS[was])


@pytest.fixture
def refund_finding(people):
    from registry import actions as registry_actions

    (outcome,) = registry_actions.apply_manifests([refund_manifest()], actor=people.alice,
                                                  source="yaml")
    return Finding.objects.create(
        agent=outcome.version.agent, fingerprint="f" * 64, kind="tool_added",
        pointer="/tools/crm.search", severity="high", area="tools", generation=1)


def at(finding: Finding, status: str) -> Finding:
    Finding.objects.filter(pk=finding.pk).update(status=status)
    return Finding.objects.get(pk=finding.pk)


@pytest.mark.django_db
@pytest.mark.parametrize(("was", "to"), ALLOWED)
def test_each_allowed_transition_is_saved(refund_finding, was, to):
    finding = at(refund_finding, was)
    finding.transition(to, reason=f"{was} to {to}")
    stored = Finding.objects.get(pk=finding.pk)
    assert (stored.status, stored.reason) == (to, f"{was} to {to}")
    if to == S.CORRECTED:
        assert stored.corrected_at and stored.hold_until > stored.corrected_at
    if to == S.ACKNOWLEDGED:
        assert stored.acknowledged_at is not None


@pytest.mark.django_db
@pytest.mark.parametrize(("was", "to"), REFUSED)
def test_an_illegal_transition_is_refused_and_changes_nothing(refund_finding, was, to):
    finding = at(refund_finding, was)
    with pytest.raises(IllegalTransition):
        finding.transition(to, reason="should not stick")
    stored = Finding.objects.get(pk=finding.pk)
    assert (stored.status, stored.reason) == (was, "")


def test_the_rules_read_as_the_loop():
    # A verified correction only reopens, regresses or goes to a human; nothing a human holds
    # is corrected; only an applied change is verified.
    assert FINDING_TRANSITIONS[S.CORRECTED] == {S.OPEN, S.REGRESSED, S.ESCALATED}
    assert all(S.CORRECTING not in FINDING_TRANSITIONS[held]
               for held in (S.ESCALATED, S.BLOCKED, S.ACCEPTED, S.RESOLVED))
    assert {was for was, to in ALLOWED if to == S.CORRECTED} == {S.CORRECTING, S.REGRESSED}


def _chain_names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def status_writes(path: Path) -> list[str]:
    """Assignments to `<something finding>.status` and `Finding.objects...update(status=)`."""
    source = path.read_text()
    hits = []
    for node in ast.walk(ast.parse(source, filename=str(path))):
        targets = (node.targets if isinstance(node, ast.Assign) else
                   [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else [])
        flat = [t for target in targets for t in ast.walk(target)]
        if any(isinstance(t, ast.Attribute) and t.attr == "status"
               and "finding" in ast.get_source_segment(source, t.value).lower()
               for t in flat):
            hits.append(f"{path.relative_to(ROOT)}:{node.lineno}")
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in {"update", "update_or_create", "bulk_update"}
                and "Finding" in _chain_names(node.func.value)
                and any("status" in ast.get_source_segment(source, arg)
                        for arg in [*node.args, *node.keywords])):
            hits.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return hits


def test_no_module_outside_the_models_writes_a_findings_status():
    sources = [path for top in ("reconciliation", "registry", "audit", "config", "runtime",
                                "sandbox", "console")
               for path in (ROOT / top).rglob("*.py")
               if "migrations" not in path.parts
               and path != ROOT / "reconciliation" / "models.py"]
    assert len(sources) > 50
    writes = [hit for path in sources for hit in status_writes(path)]
    assert not writes, writes
