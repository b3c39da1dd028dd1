"""A finding is opened and moved only through reconciliation/actions/findings.py
(`open_finding`, `move_finding`), which write the move's audit row and alert themselves: every
allowed move writes exactly the row and the alert it should, and no other module writes a
finding's audit row or creates a finding by hand."""

import ast

import pytest

from audit.models import AuditEntry, AuditPendingEntry
from reconciliation.actions.findings import move_finding, open_finding
from reconciliation.choices import FINDING_TRANSITIONS, FindingStatus
from reconciliation.models import AlertEvent, Finding
from tests.conftest import ROOT, refund_manifest

S = FindingStatus
ALLOWED = sorted((was, to) for was, targets in FINDING_TRANSITIONS.items() for to in targets)
# Held or live: it counted against the agent before, so a move back to open is a reopening.
COUNTED = {S.OPEN, S.CORRECTING, S.REGRESSED, S.BLOCKED, S.ESCALATED, S.ACCEPTED}
ROW = {S.REGRESSED: "finding.regressed", S.CORRECTED: "finding.corrected",
       S.RESOLVED: "finding.resolved", S.LOGGED: "finding.logged",
       S.ACKNOWLEDGED: "finding.acknowledged",
       # recorded by the row of what causes them (correction.applied, escalation.opened,
       # agent.suspended, escalation.resolved), written by that action
       S.CORRECTING: None, S.ESCALATED: None, S.BLOCKED: None, S.ACCEPTED: None}
ALERT = {S.REGRESSED: "drift.regressed", S.CORRECTED: "drift.corrected"}


def expected_row(was: str, to: str) -> str | None:
    if to == S.OPEN:
        return "finding.reopened" if was in COUNTED else "finding.opened"
    if (was, to) == (S.ACCEPTED, S.ESCALATED):  # its proposal refused: back to a human
        return "finding.reopened"
    return ROW[to]


def expected_alert(was: str, to: str) -> str | None:
    if to == S.OPEN:
        return None if was in COUNTED else "drift.detected"
    return ALERT.get(to)


@pytest.fixture
def refund_agent_row(people):
    from registry import actions as registry_actions

    (outcome,) = registry_actions.apply_manifests([refund_manifest()], actor=people.alice,
                                                  source="yaml")
    return outcome.version.agent


def finding_rows(finding: Finding) -> list[tuple[str, dict, dict]]:
    target = f"finding:{finding.pk}"
    return [*AuditEntry.objects.filter(target=target).values_list("action", "before", "after"),
            *AuditPendingEntry.objects.filter(target=target).values_list("action", "before",
                                                                         "after")]


def finding_alerts(finding: Finding) -> list[str]:
    """The alerts naming this finding (an incident's line lists its findings)."""
    return [event for event, payload in AlertEvent.objects.values_list("event", "payload")
            if finding.pk in (payload.get("findings") or [payload.get("finding")])]


@pytest.mark.django_db
def test_opening_a_finding_writes_one_row_and_one_alert(refund_agent_row):
    finding = open_finding(refund_agent_row, why="found by a test", after={"cause": "x"},
                           alert_fields={"message": "seen"}, fingerprint="f" * 64,
                           kind="tool_added", pointer="/tools/crm.search", severity="high",
                           area="tools", generation=1)
    assert Finding.objects.filter(pk=finding.pk, status=S.OPEN).exists()
    ((action, before, after),) = finding_rows(finding)
    assert (action, before, after["status"], after["cause"]) == ("finding.opened", None, S.OPEN,
                                                                 "x")
    assert finding_alerts(finding) == ["drift.detected"]


@pytest.mark.django_db
@pytest.mark.parametrize(("was", "to"), ALLOWED)
def test_each_move_writes_its_one_row_and_its_alert(refund_agent_row, was, to):
    finding = Finding.objects.create(
        agent=refund_agent_row, fingerprint="f" * 64, kind="tool_added",
        pointer="/tools/crm.search", severity="high", area="tools", generation=1)
    Finding.objects.filter(pk=finding.pk).update(status=was)
    finding = Finding.objects.get(pk=finding.pk)
    move_finding(finding, to, reason=f"{was} to {to}")
    assert Finding.objects.get(pk=finding.pk).status == to
    rows = finding_rows(finding)
    row = expected_row(was, to)
    if row is None:
        assert rows == []
    else:
        ((action, before, after),) = rows
        assert (action, before, after["status"]) == (row, {"status": was}, to)
    alert = expected_alert(was, to)
    assert finding_alerts(finding) == ([alert] if alert else [])


def _calls(tree: ast.AST):
    return (node for node in ast.walk(tree) if isinstance(node, ast.Call))


def _name(node: ast.AST) -> str:
    return ast.unparse(node)


def test_no_module_outside_findings_writes_a_finding_row_or_creates_a_finding():
    owner = ROOT / "reconciliation" / "actions" / "findings.py"
    sources = [path for top in ("reconciliation", "registry", "audit", "config", "runtime",
                                "sandbox", "console", "compliance", "sources", "gitsource",
                                "siem", "chat")
               for path in (ROOT / top).rglob("*.py")
               if "migrations" not in path.parts and path != owner]
    assert len(sources) > 50
    hits = []
    for path in sources:
        for call in _calls(ast.parse(path.read_text(), filename=str(path))):
            func = _name(call.func)
            action = next((_name(k.value) for k in call.keywords if k.arg == "action"), "")
            if func.endswith("record") and "FINDING_" in action:
                hits.append(f"{path.relative_to(ROOT)}:{call.lineno} {action}")
            if func.startswith("Finding.objects.") and func.rsplit(".", 1)[1] in {
                    "create", "get_or_create", "update_or_create", "bulk_create"}:
                hits.append(f"{path.relative_to(ROOT)}:{call.lineno} {func}")
            if func.endswith(".transition") and "finding" in func.lower():
                hits.append(f"{path.relative_to(ROOT)}:{call.lineno} {func}")
    assert hits == []
