"""Only the worker command's own process replaces itself (config/worker.py): a worker run
inside another process (a test's, a shell's) that reaches WORKER_MAX_JOBS or
WORKER_MAX_MEMORY_MB stops, instead of exec'ing that process's command line anew (which
started the process over: a CI run lost a test worker, and hung, that way)."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from django.conf import settings

from config import cli, process_role

ROOT = Path(__file__).resolve().parent.parent

RUNS_A_WORKER = textwrap.dedent("""
    import os
    import django
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    django.setup()
    import django_rq
    import redis
    from django.conf import settings
    from config.worker import InProcessWorker
    connection = redis.Redis.from_url(settings.REDIS_URL)
    queue = django_rq.get_queue("ingest", connection=connection, commit_mode="auto")
    job = queue.enqueue("math.sqrt", 16)
    print("started", flush=True)
    InProcessWorker([queue], connection=connection).work(burst=True)
    print("ran", job.get_status(refresh=True).value, flush=True)
""")


def test_a_worker_inside_another_process_stops_at_its_limit_instead_of_replacing_it(
        redis_client, tmp_path):
    script = tmp_path / "runs_a_worker.py"
    script.write_text(RUNS_A_WORKER)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "REDIS_URL": settings.REDIS_URL,
           "WORKER_MAX_JOBS": "1"}
    run = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.splitlines() == ["started", "ran finished"], run.stdout[-3000:]


def test_both_worker_commands_mark_their_process_as_the_worker(monkeypatch):
    """`manage.py rqworker` (tests/test_worker.py runs it, replacing itself) and `agentgov
    worker`, which runs the same management command."""
    monkeypatch.setattr(process_role, "role", "")
    process_role.mark_command("migrate")
    assert process_role.role == ""
    command = cli.management_argv(cli.parser().parse_args(["worker"]))
    process_role.mark_command(command[0])
    assert process_role.role == process_role.WORKER
