"""`make demo`: the embedded Redis if none is configured, migrate, seed, then web + worker + cron,
all supervised by supervisord: a process that dies (kill -9, Redis gone) is restarted, with a
growing delay while it keeps failing, and the others keep running.

Ctrl-C stops everything this launcher started (and only that).
"""

import os
import secrets
import shlex
import signal
import subprocess
import sys
import time
import xmlrpc.client
from pathlib import Path

from supervisor.xmlrpc import SupervisorTransport

from config import embedded_redis
from config.private_files import private_dir, var_dir, write_private

BASE_DIR = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
# A process that fails again within START_SECONDS of a restart waits 1 s, then 2 s, 3 s, ...
# before the next try, and is only given up after START_RETRIES tries in a row.
START_SECONDS = 5
START_RETRIES = 1000


def _manage(*args: str) -> list[str]:
    return [PYTHON, str(BASE_DIR / "manage.py"), *args]


def _program(name: str, command: list[str], *, autostart: bool, priority: int) -> str:
    return "\n".join([
        f"[program:{name}]",
        "command=" + shlex.join(command),
        f"directory={BASE_DIR}",
        f"autostart={'true' if autostart else 'false'}",
        "autorestart=true",
        f"startsecs={START_SECONDS}",
        f"startretries={START_RETRIES}",
        f"priority={priority}",
        "stopsignal=TERM",
        "stopwaitsecs=15",
        "stopasgroup=true",
        "killasgroup=true",
        "redirect_stderr=true",
        "stdout_logfile=/dev/stdout",
        "stdout_logfile_maxbytes=0",
        "",
    ])


def supervisor_config(var: Path, port: int, redis: list[str] | None) -> Path:
    """supervisord's config for this run, owner-only under var/; its control socket wants a
    password generated for the run (kept in the config, which supervisorctl reads)."""
    password = secrets.token_urlsafe(24)
    sections = [
        "[supervisord]", "nodaemon=true", "umask=077", f"logfile={var / 'supervisord.log'}",
        f"pidfile={var / 'supervisord.pid'}", "loglevel=info",
        # As root (a container) it stays root: saying so silences supervisord's warning.
        *(["user=root"] if os.geteuid() == 0 else []), "",
        "[unix_http_server]", f"file={var / 'supervisor.sock'}", "chmod=0700",
        "username=launcher", f"password={password}", "",
        "[rpcinterface:supervisor]",
        "supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface", "",
        "[supervisorctl]", f"serverurl=unix://{var / 'supervisor.sock'}",
        "username=launcher", f"password={password}", "",
    ]
    if redis:
        sections.append(_program("redis", redis, autostart=True, priority=1))
    sections += [
        _program("web", [PYTHON, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
                         "config.asgi:application"], autostart=False, priority=10),
        _program("worker", _manage("rqworker", "reconcile", "ingest", "default",
                                   "--with-scheduler"), autostart=False, priority=20),
        _program("cron", _manage("cron"), autostart=False, priority=30),
    ]
    path = var / "supervisord.conf"
    write_private(path, "\n".join(sections))
    return path


def supervisor_rpc(config: Path) -> xmlrpc.client.ServerProxy:
    """supervisord's XML-RPC interface over its unix socket, with the run's credentials."""
    values = dict(line.split("=", 1) for line in
                  config.read_text().split("[supervisorctl]", 1)[1].splitlines() if "=" in line)
    transport = SupervisorTransport(values["username"], values["password"], values["serverurl"])
    return xmlrpc.client.ServerProxy("http://127.0.0.1", transport)


def _wait_for_port(port: int, process: subprocess.Popen, what: str) -> None:
    deadline = time.monotonic() + 60
    while not embedded_redis.port_answers("127.0.0.1", port):
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not start")
        time.sleep(0.2)


def main() -> int:
    os.umask(0o077)  # var/ holds secrets and the database: owner-only
    env = dict(os.environ)
    env.setdefault("DEMO_SIMULATOR_SECONDS", "90")  # a living cluster: now and then a drift
    env["PYTHONUNBUFFERED"] = "1"
    var = private_dir(var_dir())
    redis_command, redis_port = None, None
    if not env.get("REDIS_URL"):
        config = embedded_redis.write_config(var / "redis")
        env["REDIS_URL"] = config.url
        redis_command, redis_port = embedded_redis.foreground_command(config), config.port
        print(f"Embedded Redis at {config.display_url} (password in {config.path})")
    port = int(env.get("PORT", "8000"))
    if embedded_redis.port_answers("127.0.0.1", port):
        port = embedded_redis.free_port()
    config_path = supervisor_config(var, port, redis_command)
    supervisor = subprocess.Popen([PYTHON, "-m", "supervisor.supervisord", "-c", str(config_path)],
                                  env=env, cwd=BASE_DIR)
    stopping = False

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    try:
        if redis_port is not None:
            _wait_for_port(redis_port, supervisor, "the embedded Redis")
        subprocess.run(_manage("migrate", "--noinput", "-v", "0"), env=env, check=True)
        logins = subprocess.run(_manage("seed_demo"), env=env, check=True, capture_output=True,
                                text=True).stdout
        supervisor_rpc(config_path).supervisor.startAllProcesses(False)  # no waiting in turn
        _wait_for_port(port, supervisor, "the web process")
        print(f"\nAgent governance is running at http://127.0.0.1:{port}/\n\n"
              "Demo logins (user, password, role):")
        print(logins)
        print(f"Processes: {PYTHON} -m supervisor.supervisorctl -c {config_path} status")
        print("Press Ctrl-C to stop.\n", flush=True)
        while not stopping and supervisor.poll() is None:
            time.sleep(0.5)
    finally:
        if supervisor.poll() is None:
            supervisor.send_signal(signal.SIGTERM)  # it stops every program, then exits
            try:
                supervisor.wait(timeout=60)
            except subprocess.TimeoutExpired:
                supervisor.kill()
        print("Stopped.", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
