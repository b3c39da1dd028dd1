"""`manage.py policy_test DIR`: guardrails kept as YAML with example manifests and expected
verdicts beside them; a failing case names itself and fails the run."""

import pytest
from django.core.management import CommandError, call_command

from tests.gitsource.repos import manifest

GUARDRAIL = """\
apiVersion: governance/v1
kind: Guardrail
metadata: {name: no-gpt-5}
spec:
  expression: 'spec.model != "gpt-5"'
  effect: deny
  message: gpt-5 is not approved for payments
  selector: {team: payments}
"""
TESTS = """\
apiVersion: governance/v1
kind: PolicyTest
metadata: {name: no-gpt-5-cases}
spec:
  guardrail: no-gpt-5
  cases:
    - {name: gpt-4.1 passes, manifest: examples/gpt-4.1.yaml, expect: passed}
    - {name: gpt-5 is denied, manifest: examples/gpt-5.yaml, expect: %s}
"""


def policy_folder(tmp_path, expect_for_gpt5: str):
    (tmp_path / "examples").mkdir(parents=True)
    (tmp_path / "examples" / "gpt-4.1.yaml").write_text(manifest())
    (tmp_path / "examples" / "gpt-5.yaml").write_text(
        manifest(("model: gpt-4.1", "model: gpt-5")))
    (tmp_path / "no-gpt-5.yaml").write_text(GUARDRAIL)
    (tmp_path / "no-gpt-5_test.yaml").write_text(TESTS % expect_for_gpt5)
    return tmp_path


def test_cases_that_hold_pass(tmp_path, capsys):
    call_command("policy_test", str(policy_folder(tmp_path, "denied")))
    assert capsys.readouterr().out.splitlines() == [
        "ok   no-gpt-5-cases: gpt-4.1 passes: expected passed, got passed",
        "ok   no-gpt-5-cases: gpt-5 is denied: expected denied, got denied",
        "2 case(s) passed"]


def test_a_failing_case_is_named_and_fails_the_run(tmp_path, capsys):
    with pytest.raises(CommandError, match=r"^1 of 2 case\(s\) failed$") as failed:
        call_command("policy_test", str(policy_folder(tmp_path, "warned")))
    assert failed.value.returncode == 1
    assert ("FAIL no-gpt-5-cases: gpt-5 is denied: expected warned, got denied (gpt-5 is not "
            "approved for payments)") in capsys.readouterr().out


def test_unreadable_policies_are_refused_with_the_field(tmp_path):
    folder = policy_folder(tmp_path, "denied")
    (folder / "no-gpt-5.yaml").write_text(GUARDRAIL.replace("effect: deny", "effect: maybe"))
    with pytest.raises(CommandError,
                       match="guardrail no-gpt-5: /spec/effect: expected one of") as unreadable:
        call_command("policy_test", str(folder))
    assert unreadable.value.returncode == 2
    (folder / "no-gpt-5.yaml").write_text(GUARDRAIL.replace("  effect: deny\n",
                                                            "  effect: deny\n  typo: 1\n"))
    with pytest.raises(CommandError, match="unknown field /spec/typo"):
        call_command("policy_test", str(folder))
