"""A process's start-up (config/startup.py): the entry points load the product with the cyclic
garbage collector paused (no full collection while ~300,000 objects that live as long as the
process are made), and every process runs with it on afterwards, what it loaded frozen out
of its reach. A worker or a command does not import the web server's Twisted reactor, and no
process loads the agent client's HTTP stack or the CEL library before it uses them."""

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

# What a process reports about its collector once it is running.
REPORT = ("import gc, json, sys; print(json.dumps({'enabled': gc.isenabled(), "
          "'frozen': gc.get_freeze_count(), 'full': gc.get_stats()[2]['collections'], "
          "'twisted': 'twisted.internet.reactor' in sys.modules, "
          "'daphne': 'daphne.server' in sys.modules, "
          "'unused': sorted(m for m in ('httpx', 'cel') if m in sys.modules)}))")
# httpx comes with the agent client (whose audit formats every process imports) and cel's
# package imports its own command line (typer, rich, prompt_toolkit): ~110 ms of each start
# between them, in processes that mostly never send a request nor evaluate a guardrail.


def environment(var: Path) -> dict[str, str]:
    # VAR_DIR is made owner-only by the product: a directory of the test's own.
    return {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "VAR_DIR": str(var),
            "REDIS_URL": "redis://127.0.0.1:1/0"}


def run(argv: list[str], var: Path) -> dict:
    result = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120,
                            env=environment(var))
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_a_command_starts_without_full_collections_and_runs_with_the_collector_on(tmp_path):
    for argv in ([sys.executable, "manage.py", "shell", "-c", REPORT],
                 [sys.executable, "-m", "config.cli", "manage", "shell", "-c", REPORT]):
        seen = run(argv, tmp_path)
        assert seen["enabled"] is True, argv  # a worker never runs with it off
        assert seen["frozen"] > 100_000, argv  # what start-up loaded, out of its reach
        assert seen["full"] == 0, argv  # start-up did not walk what it was making
        # Twisted's reactor is the web server's: a worker or a command does without it.
        assert not seen["twisted"] and not seen["daphne"], argv
        assert seen["unused"] == [], argv


def test_the_web_application_loads_without_full_collections(tmp_path):
    seen = run([sys.executable, "-c", f"import config.asgi; {REPORT}"], tmp_path)
    assert seen["enabled"] is True and seen["frozen"] > 100_000 and seen["full"] == 0
    assert seen["unused"] == []


def test_runserver_is_still_the_asgi_one_with_websockets(tmp_path):
    for argv in ([sys.executable, "manage.py", "runserver", "--help"],
                 [sys.executable, "-m", "config.cli", "manage", "runserver", "--help"]):
        help_text = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True,
                                   timeout=120, env=environment(tmp_path))
        assert help_text.returncode == 0, help_text.stderr
        assert "--noasgi" in help_text.stdout, argv  # daphne's, not Django's WSGI one


def test_an_entry_point_inside_a_running_process_leaves_the_collector_on(tmp_path):
    # Django set up first (a test, a shell): no ready() follows the entry point's pause, so
    # pausing would leave the collector off for the rest of the process, and every connection
    # object a finished thread left (they refer to each other) open.
    seen = run([sys.executable, "-c", "import os, django; "
                "os.environ['DJANGO_SETTINGS_MODULE'] = 'config.settings'; django.setup(); "
                "from config import startup; startup.pause_collector(); "
                f"import config.asgi; {REPORT}"], tmp_path)
    assert seen["enabled"] is True
