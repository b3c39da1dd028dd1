"""`seed_demo` with STEPUP_RISK_THRESHOLD set: every demo approval that needs step-up is given
with a real code from the demo approver's enrolled authenticator, and the audit says so."""

from django.core.management import call_command

from audit.models import AuditEntry
from registry.models import Agent


def test_the_demo_seeds_with_a_step_up_threshold_set(db, settings, tmp_path):
    settings.VAR_DIR = tmp_path
    settings.STEPUP_RISK_THRESHOLD = 0  # every widening proposal needs a fresh code
    call_command("seed_demo", "--force")
    assert Agent.objects.count() == 40
    assert set(Agent.objects.values_list("generation", flat=True)) == {1}
    stepped = [e for e in AuditEntry.objects.filter(action="proposal.approved")
               if (e.after or {}).get("step_up")]
    assert stepped and {e.actor for e in stepped} <= {"bob", "carol"}
    assert stepped[0].after["step_up"]["method"] == "totp"
    assert (tmp_path / "demo-totp.json").exists()
    call_command("seed_demo", "--force")  # idempotent, with the devices already enrolled
    assert Agent.objects.count() == 40
