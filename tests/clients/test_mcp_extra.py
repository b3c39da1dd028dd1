"""The MCP SDKs belong to the client's optional `mcp` extra, never to the control plane."""

import subprocess
import sys
import tomllib

from tests.conftest import ROOT, child_env, fresh_venv, installed

MCP_PACKAGES = ("mcp", "fastmcp", "fastmcp-slim", "mcp-types")


def _names(requirements: list[str]) -> set[str]:
    return {req.split(";")[0].split("[")[0].split("=")[0].split("<")[0].split(">")[0]
            .strip().lower() for req in requirements}


def test_the_control_planes_own_dependencies_hold_no_mcp_sdk():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    every = [*project["dependencies"],
             *(req for extra in project.get("optional-dependencies", {}).values()
               for req in extra)]
    assert not _names(every) & set(MCP_PACKAGES)


def test_the_client_offers_them_pinned_in_its_mcp_extra():
    client = tomllib.loads((ROOT / "clients/python/pyproject.toml").read_text())["project"]
    assert _names(client["dependencies"]).isdisjoint(MCP_PACKAGES)
    # jsonschema: the proxy checks arguments against the approved input schema
    assert client["optional-dependencies"]["mcp"] == ["fastmcp==4.1.6", "mcp==2.3.0",
                                                      "jsonschema>=4.23,<5"]


def test_the_control_plane_never_imports_an_mcp_sdk():
    # every app's URLs, API, jobs and connectors, as a web process and a worker load them
    probe = ("import sys, django; django.setup(); import config.urls, config.asgi, "
             "reconciliation.jobs, reconciliation.connectors, registry.api; "
             "print(sorted(m for m in sys.modules if m.split('.')[0] in "
             f"{MCP_PACKAGES!r}))")
    loaded = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=child_env(),
                            capture_output=True, text=True, timeout=120)
    assert loaded.returncode == 0, loaded.stderr[-2000:]
    assert loaded.stdout.strip() == "[]"


def test_without_the_extra_agentctl_says_how_to_install_it():
    # fastmcp made unimportable, as in an install without [mcp]
    script = ("import sys; sys.modules['fastmcp'] = None; from agentgov.cli import main; "
              "sys.exit(main(['--token', 'k', 'mcp-observe', '--agent', 'a', "
              "'--upstream', 'http://127.0.0.1:9/mcp']))")
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 1
    assert "pip install 'agentgov-client[mcp]'" in run.stderr


def test_the_extra_installs_on_its_own_in_a_fresh_venv(tmp_path):
    venv = tmp_path / "venv"
    python = fresh_venv(venv, f"{ROOT / 'clients' / 'python'}[mcp]")
    packages = installed(python)
    assert packages.get("fastmcp") == "4.1.6" and "django" not in packages
    usage = subprocess.run([str(venv / "bin" / "agentctl"), "mcp-proxy", "--help"],
                           capture_output=True, text=True, timeout=60)
    assert usage.returncode == 0 and "--upstream" in usage.stdout
    imported = subprocess.run([str(python), "-c", "import agentgov.mcp_proxy"],
                              capture_output=True, text=True, timeout=120)
    assert imported.returncode == 0, imported.stderr[-2000:]
