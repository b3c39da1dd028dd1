"""`pip install ./clients/python` works in a fresh virtualenv: no Django, agentctl runs."""

import subprocess
import sys

from tests.conftest import ROOT


def test_the_client_installs_on_its_own_in_a_fresh_venv(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    install = subprocess.run([str(python), "-m", "pip", "install", "--quiet",
                              str(ROOT / "clients" / "python")],
                             capture_output=True, text=True, timeout=600)
    assert install.returncode == 0, install.stderr[-2000:]
    packages = subprocess.run([str(python), "-m", "pip", "list", "--format=freeze"],
                              capture_output=True, text=True, check=True).stdout.lower()
    assert "agentgov-client==" in packages and "django" not in packages
    usage = subprocess.run([str(venv / "bin" / "agentctl"), "--help"], capture_output=True,
                           text=True, timeout=60)
    assert usage.returncode == 0 and "apply" in usage.stdout and "audit" in usage.stdout
    imported = subprocess.run([str(python), "-c", "import agentgov; print(agentgov.Client)"],
                              capture_output=True, text=True, timeout=60)
    assert "agentgov.client.Client" in imported.stdout
