"""Alert names are an enum (audit/alert_kinds.py AlertKind), as audit actions are: the sender
refuses a name it does not know, no module spells one by hand, and every name a browser's
script matches on is one of them (the wire names never change)."""

import ast
import re
from pathlib import Path

import pytest
from django.db import transaction

from audit.alert_kinds import AlertKind
from audit.sentences import sentence
from reconciliation import alerts
from reconciliation.models import AlertEvent

ROOT = Path(__file__).resolve().parents[2]
APPS = ["config", "audit", "registry", "reconciliation", "runtime", "sandbox", "console",
        "sources", "gitsource", "compliance", "siem", "chat"]
WIRE_NAMES = {"drift.detected", "drift.regressed", "drift.corrected", "rollout.started",
              "rollout.synced", "escalation.opened", "escalation.resolved",
              "escalation.snoozed", "escalation.woke", "decision.pending", "agent.suspended",
              "agent.silent", "agent.heard_again", "breaker.tripped", "recertification.due",
              "recertification.overdue", "inbox.sla_breached", "proposal.pending",
              "proposal.review", "proposal.decided", "fleet.stopped", "audit.signing_refused",
              "catchup.truncated"}


def test_the_wire_names_are_the_ones_clients_already_know():
    assert {kind.value for kind in AlertKind} == WIRE_NAMES


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("name", ["drift.detectd", "Drift.Detected", "drift", "",
                                  "catchup.truncated"])
def test_the_sender_refuses_a_name_that_is_not_an_alert_and_records_nothing(name):
    with pytest.raises(ValueError, match="unknown alert event"), transaction.atomic():
        alerts.broadcast(name, {"severity": "high", "message": "x"})
    assert not AlertEvent.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_known_name_is_recorded_under_its_wire_name():
    with transaction.atomic():
        alerts.broadcast(AlertKind.BREAKER_TRIPPED, {"severity": "high", "message": "5 agents"})
        alerts.broadcast("agent.silent", {"severity": "medium", "message": "no word in 1h"})
    assert list(AlertEvent.objects.order_by("pk").values_list("event", flat=True)) == [
        "breaker.tripped", "agent.silent"]
    assert sentence({"event": "breaker.tripped", "message": "5 agents"}) == (
        "Breaker tripped for the cluster: 5 agents")


def _modules():
    for app in APPS:
        for path in (ROOT / app).rglob("*.py"):
            # audit/choices.py: audit actions that share a name with an alert
            if "migrations" not in path.parts and path.relative_to(ROOT).as_posix() not in (
                    "audit/alert_kinds.py", "audit/choices.py"):
                yield path


def test_no_module_spells_an_alert_name_by_hand():
    loose = []
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Constant) and node.value in WIRE_NAMES:
                loose.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.value!r}")
    assert loose == [], "use AlertKind:\n" + "\n".join(loose)


def test_every_name_the_browsers_scripts_match_on_is_an_alert():
    scripts = (ROOT / "console" / "static" / "js").glob("*.js")
    text = "\n".join(path.read_text() for path in scripts)
    named = set(re.findall(r"""["']([a-z_]+\.[a-z_]+)["']""", text)) & {
        f"{prefix}.{rest}" for prefix, rest in re.findall(r"""["']([a-z_]+)\.([a-z_]+)["']""",
                                                          text)
        if prefix in {kind.value.split(".")[0] for kind in AlertKind}}
    assert named and named <= WIRE_NAMES
    for prefixes in re.findall(r"/\^\(([a-z_|]+)\)\\\./", text):
        for prefix in prefixes.split("|"):
            assert any(kind.value.startswith(prefix + ".") for kind in AlertKind), prefix
