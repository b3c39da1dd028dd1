"""`manage.py apply -f`: kubectl-like output, dry runs, directories, and clear failures."""

import pytest
from django.core.management import CommandError, call_command

from registry import actions
from registry.models import Agent, DesiredStateVersion
from tests.conftest import REFUND_AGENT_YAML

pytestmark = pytest.mark.django_db


def test_apply_creates_then_reports_unchanged_then_proposes(people, tmp_path, capsys):
    manifest = tmp_path / "refund.yaml"
    manifest.write_text(REFUND_AGENT_YAML)
    call_command("apply", "-f", str(tmp_path))
    out = capsys.readouterr().out
    proposal = DesiredStateVersion.objects.get()
    assert out.splitlines()[0] == f"agent/refund-agent created as proposal {proposal.pk}"
    assert "  + tool payments.refund" in out.splitlines()

    call_command("apply", "-f", str(manifest))
    assert capsys.readouterr().out.strip() == "agent/refund-agent unchanged"

    actions.approve_proposal(proposal.pk, actor=people.bob)
    manifest.write_text(REFUND_AGENT_YAML.replace("model: gpt-4.1", "model: gpt-5"))
    call_command("apply", "-f", str(manifest), "--dry-run")
    out = capsys.readouterr().out.splitlines()
    assert out == ["agent/refund-agent proposed (dry run)", "  model gpt-4.1 → gpt-5"]
    assert DesiredStateVersion.objects.get().spec["model"] == "gpt-4.1"


def test_apply_reports_every_error_with_pointer_and_line_and_changes_nothing(people, tmp_path):
    manifest = tmp_path / "bad.yaml"
    manifest.write_text(REFUND_AGENT_YAML.replace("access: read}", "access: rule}"))
    with pytest.raises(CommandError) as failed:
        call_command("apply", "-f", str(manifest))
    assert "/spec/data/0/access (line 15): expected one of read, write, admin" in str(
        failed.value)
    assert not Agent.objects.exists()
    with pytest.raises(CommandError, match="no such file"):
        call_command("apply", "-f", str(tmp_path / "missing.yaml"))


def test_a_directory_is_applied_all_or_nothing(people, tmp_path):
    from audit.models import AuditEntry

    (tmp_path / "a-refund.yaml").write_text(REFUND_AGENT_YAML)
    (tmp_path / "b-payouts.yaml").write_text(
        REFUND_AGENT_YAML.replace("name: refund-agent", "name: payouts-agent"))
    actions.create_guardrail(actor=people.dana, name="no-payouts", effect="deny",
                             expression='metadata.name != "payouts-agent"',
                             message="payouts run elsewhere")
    before = AuditEntry.objects.count()
    with pytest.raises(CommandError, match="nothing was applied"):
        call_command("apply", "-f", str(tmp_path))
    assert not Agent.objects.exists() and not DesiredStateVersion.objects.exists()
    assert AuditEntry.objects.count() == before
