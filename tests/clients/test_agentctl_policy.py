"""`agentctl policy test DIR` against a real server: the folder's cases judged by the server's
evaluator (the one policy commits meet), exit 0 / 1 / 2 as `manage.py policy_test`, and nothing
stored."""

import pytest
from agentgov.cli import main

from gitsource.models import PolicyChange
from registry.models import Guardrail
from tests.gitsource.test_policy_tests import GUARDRAIL, policy_folder


@pytest.fixture
def ctl(server, capsys):
    def run(token: str, *argv: str) -> tuple[int, str, str]:
        status = main(["--url", server, f"--token={token}", *argv])
        out, err = capsys.readouterr()
        return status, out, err

    return run


def test_policy_test_runs_the_folders_cases_on_the_server(ctl, keys, tmp_path):
    folder = policy_folder(tmp_path / "ok", "denied")
    status, out, _ = ctl(keys.alice, "policy", "test", str(folder))
    assert status == 0
    assert out.splitlines() == [
        "ok   no-gpt-5-cases: gpt-4.1 passes: expected passed, got passed",
        "ok   no-gpt-5-cases: gpt-5 is denied: expected denied, got denied",
        "2 case(s) passed"]

    failing = policy_folder(tmp_path / "failing", "warned")
    status, out, _ = ctl(keys.alice, "policy", "test", str(failing))
    assert status == 1
    assert ("FAIL no-gpt-5-cases: gpt-5 is denied: expected warned, got denied (gpt-5 is not "
            "approved for payments)") in out.splitlines()
    assert out.splitlines()[-1] == "1 of 2 case(s) failed"

    (folder / "no-gpt-5.yaml").write_text(GUARDRAIL.replace("effect: deny", "effect: maybe"))
    status, out, err = ctl(keys.alice, "policy", "test", str(folder))
    assert (status, out) == (2, "")
    assert "guardrail no-gpt-5: /spec/effect: expected one of" in err

    status, _, err = ctl(keys.alice, "policy", "test", str(tmp_path / "nowhere"))
    assert status == 2 and "not a directory" in err
    assert not Guardrail.objects.exists() and not PolicyChange.objects.exists()
