"""`make demo`: the embedded Redis if none is configured, migrate, seed, then web + worker + cron,
all supervised by supervisord: a process that dies (kill -9, Redis gone) is restarted, with a
growing delay while it keeps failing, and the others keep running.

It says what it is doing, one line per step; the processes write their logs to var/logs/ (a
job a second would bury the URL), and the URL and the demo logins are printed last. While it
runs, var/demo.json says where (`make example` reads it).

Ctrl-C stops everything this launcher started (and only that).
"""

import http.client
import json
import os
import secrets
import shlex
import signal
import subprocess
import sys
import time
import xmlrpc.client
from collections.abc import Callable
from pathlib import Path
from typing import Any

from supervisor.xmlrpc import SupervisorTransport

from config import embedded_redis
from config.private_files import private_dir, var_dir, write_private

BASE_DIR = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
PROGRAMS = ("redis", "web", "worker", "cron")
# While the web process lives the launcher waits for it however long it takes (a loaded machine
# can take minutes); it gives up only when the web process has died this many times without
# ever answering, or supervisord itself is gone.
WEB_DEATHS = 3
STILL_WAITING_SECONDS = 15
# A process that fails again within START_SECONDS of a restart waits 1 s, then 2 s, 3 s, ...
# before the next try, and is only given up after START_RETRIES tries in a row.
START_SECONDS = 5
START_RETRIES = 1000


FILE_EMAIL_BACKEND = "django.core.mail.backends.filebased.EmailBackend"


def _manage(*args: str) -> list[str]:
    return [PYTHON, str(BASE_DIR / "manage.py"), *args]


def _program(name: str, command: list[str], *, autostart: bool, priority: int,
             logs: Path) -> str:
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
        f"stdout_logfile={logs / f'{name}.log'}",
        "stdout_logfile_maxbytes=10MB",
        "stdout_logfile_backups=2",
        "",
    ])


def demo_programs(port: int) -> dict[str, list[str]]:
    """The demo's processes, started in this order: the web process, a worker, the cron."""
    return {
        "web": [PYTHON, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
                "config.asgi:application"],
        "worker": _manage("rqworker", "reconcile", "ingest", "default", "--with-scheduler"),
        "cron": _manage("cron"),
    }


def supervisor_config(var: Path, port: int, redis: list[str] | None,
                      programs: dict[str, list[str]] | None = None) -> Path:
    """supervisord's config for this run, owner-only under var/; its control socket wants a
    password generated for the run (kept in the config, which supervisorctl reads)."""
    password = secrets.token_urlsafe(24)
    logs = log_dir(var)
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
        sections.append(_program("redis", redis, autostart=True, priority=1, logs=logs))
    sections += [_program(name, command, autostart=False, priority=10 * (order + 1), logs=logs)
                 for order, (name, command) in enumerate((programs or demo_programs(port)).items())]
    path = var / "supervisord.conf"
    write_private(path, "\n".join(sections))
    return path


def supervisor_rpc(config: Path) -> xmlrpc.client.ServerProxy:
    """supervisord's XML-RPC interface over its unix socket, with the run's credentials."""
    values = dict(line.split("=", 1) for line in
                  config.read_text().split("[supervisorctl]", 1)[1].splitlines() if "=" in line)
    transport = SupervisorTransport(values["username"], values["password"], values["serverurl"])
    return xmlrpc.client.ServerProxy("http://127.0.0.1", transport)


def log_dir(var: Path) -> Path:
    """Where the processes' logs go: one file per program."""
    return private_dir(var / "logs")


def demo_file(var: Path) -> Path:
    """var/demo.json: where the running demo answers, for `make example`."""
    return var / "demo.json"


def say(line: str) -> None:
    print(line, flush=True)


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return "(no log yet)"


def _wait_for_port(port: int, process: subprocess.Popen, what: str) -> None:
    """A process that runs in the foreground of supervisord (the embedded Redis starts in a
    moment): wait while supervisord lives."""
    while not embedded_redis.port_answers("127.0.0.1", port):
        if process.poll() is not None:
            raise RuntimeError(f"{what} did not start")
        time.sleep(0.2)


def wait_for_web(port: int, supervisor: subprocess.Popen, rpc: Any, logs: Path,
                 stopping: Callable[[], bool]) -> bool:
    """Wait until the web process answers on `port`, as long as it keeps living; False when
    it died WEB_DEATHS times without answering (or supervisord went away, or Ctrl-C)."""
    started = last_said = time.monotonic()
    deaths: set[int] = set()
    while not embedded_redis.port_answers("127.0.0.1", port):
        if stopping() or supervisor.poll() is not None:
            return False
        info = rpc.supervisor.getProcessInfo("web")
        if info["statename"] in ("BACKOFF", "EXITED", "FATAL") and info["pid"] == 0:
            deaths.add(info["stop"])  # each death has its own stop time
        if info["statename"] == "FATAL" or len(deaths) >= WEB_DEATHS:
            say(f"The web process died {len(deaths)} times before it answered; the end of "
                f"{logs / 'web.log'}:\n{_tail(logs / 'web.log')}")
            return False
        if time.monotonic() - last_said > STILL_WAITING_SECONDS:
            last_said = time.monotonic()
            say(f"   still waiting for the web process to answer "
                f"({last_said - started:.0f} s; it is {info['statename'].lower()})")
        time.sleep(0.2)
    return True


def _listening_rpc(config: Path, supervisor: subprocess.Popen, var: Path) -> Any:
    """supervisord's interface once it listens (it may still be starting, and a socket file
    left by an earlier run answers nothing); a new connection for each try, since one whose
    request failed cannot send another."""
    while True:
        rpc = supervisor_rpc(config)
        try:
            rpc.supervisor.getState()
            return rpc
        except (OSError, http.client.HTTPException):
            if supervisor.poll() is not None:
                raise StepFailed(f"supervisord exited; see {var / 'supervisord.log'}") from None
            time.sleep(0.2)


def _step(text: str, command: list[str], env: dict[str, str]) -> str:
    """Run one set-up step, saying what and how long; its output is shown only on failure
    (the step's stdout is returned)."""
    say(f"==> {text}...")
    began = time.monotonic()
    result = subprocess.run(command, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        raise StepFailed(f"{text} failed:\n{result.stdout}{result.stderr}")
    say(f"    done in {time.monotonic() - began:.0f} s")
    return result.stdout


class StepFailed(RuntimeError):
    """A set-up step (migrate, seed) exited non-zero; its message holds its output."""


def ready_text(url: str, logins: str, config_path: Path, logs: Path,
               mail_sink: bool = False) -> str:
    """What the launcher prints once the site answers: how to follow and stop it (and where the
    mail it sends is read), then the URL and the logins last, where they stay on screen."""
    names = ", ".join(f"{name}.log" for name in PROGRAMS)
    mail = (f"Email it sends (no mail server here) is read at {url}mail/ by compliance and "
            "admin logins.\n" if mail_sink else "")
    return (f"\nLogs ({names}) are in {logs}/; follow them with:\n"
            f"    tail -f {logs}/*.log\n"
            f"Processes: {PYTHON} -m supervisor.supervisorctl -c {config_path} status\n"
            f"{mail}"
            "Press Ctrl-C to stop.\n\n"
            f"Agent governance is running at {url}\n\n"
            "Demo logins (user, password, role):\n"
            f"{logins.rstrip()}\n")


def main() -> int:
    os.umask(0o077)  # var/ holds secrets and the database: owner-only
    env = dict(os.environ)
    env.setdefault("DEMO_SIMULATOR_SECONDS", "90")  # a living cluster: now and then a drift
    # No SMTP server on a laptop: the demo's mail goes to files under var/mail, read on /mail/.
    env.setdefault("EMAIL_BACKEND", FILE_EMAIL_BACKEND)
    env["PYTHONUNBUFFERED"] = "1"
    var = private_dir(var_dir())
    logs = log_dir(var)
    redis_command, redis_port = None, None
    if not env.get("REDIS_URL"):
        config = embedded_redis.write_config(var / "redis")
        env["REDIS_URL"] = config.url
        redis_command, redis_port = embedded_redis.foreground_command(config), config.port
        say(f"Embedded Redis at {config.display_url} (password in {config.path})")
    port = int(env.get("PORT", "8000"))
    if embedded_redis.port_answers("127.0.0.1", port):
        port = embedded_redis.free_port()
    url = f"http://127.0.0.1:{port}/"
    config_path = supervisor_config(var, port, redis_command)
    supervisor = subprocess.Popen([PYTHON, "-m", "supervisor.supervisord", "-c", str(config_path)],
                                  env=env, cwd=BASE_DIR, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.STDOUT)
    stopping = False

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    status = 0
    try:
        rpc = _listening_rpc(config_path, supervisor, var)
        # The web process loads (a long import on a busy machine) while the database is
        # migrated and seeded: it reads nothing until a request comes. The worker and the
        # scheduler wait for the seed (they would race it for the database).
        rpc.supervisor.startProcess("web", False)  # no waiting for it to be up
        if redis_port is not None:
            _wait_for_port(redis_port, supervisor, "the embedded Redis")
        _step("Migrating the database (the first run creates it)",
              _manage("migrate", "--noinput", "-v", "0"), env)
        logins = _step("Seeding the demo people and agents", _manage("seed_demo"), env)
        say("==> Starting a worker and the scheduler (the web process is already loading)...")
        rpc = _listening_rpc(config_path, supervisor, var)  # a fresh connection after the wait
        rpc.supervisor.startAllProcesses(False)  # the others; no waiting in turn
        if not wait_for_web(port, supervisor, rpc, logs, lambda: stopping):
            return 0 if stopping else 1
        write_private(demo_file(var), json.dumps({"url": url, "pid": os.getpid(),
                                                  "logs": str(logs)}))
        print(ready_text(url, logins, config_path, logs,
                         mail_sink=env["EMAIL_BACKEND"] == FILE_EMAIL_BACKEND), flush=True)
        while not stopping and supervisor.poll() is None:
            time.sleep(0.5)
    except StepFailed as error:
        say(str(error))
        status = 1
    finally:
        _forget(demo_file(var))
        if supervisor.poll() is None:
            supervisor.send_signal(signal.SIGTERM)  # it stops every program, then exits
            try:
                supervisor.wait(timeout=60)
            except subprocess.TimeoutExpired:
                supervisor.kill()
        say("Stopped.")
    return status


def _forget(path: Path) -> None:
    """Remove var/demo.json if this launcher wrote it (another demo may have started since)."""
    try:
        if json.loads(path.read_text()).get("pid") == os.getpid():
            path.unlink()
    except (FileNotFoundError, ValueError):
        pass


if __name__ == "__main__":
    sys.exit(main())
