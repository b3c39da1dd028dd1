"""`pip install ./clients/python` works in a fresh virtualenv: no Django, agentctl runs."""

import subprocess

from tests.conftest import ROOT, fresh_venv, installed


def test_the_client_installs_on_its_own_in_a_fresh_venv(tmp_path):
    venv = tmp_path / "venv"
    python = fresh_venv(venv, str(ROOT / "clients" / "python"), timeout=600)
    packages = installed(python)
    assert "agentgov-client" in packages and "django" not in packages
    usage = subprocess.run([str(venv / "bin" / "agentctl"), "--help"], capture_output=True,
                           text=True, timeout=60)
    assert usage.returncode == 0 and "apply" in usage.stdout and "audit" in usage.stdout
    imported = subprocess.run([str(python), "-c", "import agentgov; print(agentgov.Client)"],
                              capture_output=True, text=True, timeout=60)
    assert "agentgov.client.Client" in imported.stdout
