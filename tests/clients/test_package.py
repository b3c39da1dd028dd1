"""`pip install ./clients/python` works in a fresh virtualenv: no Django, agentctl runs."""

import subprocess
import sys

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


def test_every_name_the_package_offers_is_there_and_the_audit_formats_need_no_http():
    # The package's names load when first used: each one it lists must resolve, `import *`
    # must give them all, and importing the audit trail's formats (what the control plane
    # imports in every process) must not load the HTTP client.
    script = (
        "import sys, agentgov\n"
        "import agentgov.entries, agentgov.merkle, agentgov.checkpoints\n"
        "assert 'httpx' not in sys.modules, 'the audit formats loaded httpx'\n"
        "names = {}\n"
        "exec('from agentgov import *', names)\n"
        "missing = [n for n in agentgov.__all__ if n not in names]\n"
        "assert not missing, missing\n"
        "assert set(agentgov.__all__) <= set(dir(agentgov))\n"
        "from agentgov import verify_webhook\n"
        "from agentgov.webhooks import verify\n"
        "assert verify_webhook is verify\n"
        "try:\n"
        "    agentgov.NoSuchName\n"
        "except AttributeError:\n"
        "    print('ok')\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=60, cwd=ROOT)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-2000:]
