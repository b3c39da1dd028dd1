"""`make demo`: embedded Redis if none is configured, migrate, seed, then web + worker + cron.

Ctrl-C stops everything this launcher started (and only that).
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from config import embedded_redis

BASE_DIR = Path(__file__).resolve().parent.parent
PYTHON = sys.executable


def _manage(*args: str) -> list[str]:
    return [PYTHON, str(BASE_DIR / "manage.py"), *args]


def main() -> int:
    env = dict(os.environ)
    env.setdefault("DEMO_SIMULATOR_SECONDS", "90")  # a living cluster: now and then a drift
    var_dir = Path(env.get("VAR_DIR", BASE_DIR / "var"))
    started_redis = False
    if not env.get("REDIS_URL"):
        state = var_dir / "redis" / "server"
        was_running = state.exists()
        env["REDIS_URL"] = embedded_redis.ensure_running(var_dir / "redis")
        started_redis = not was_running
        print(f"Embedded Redis at {env['REDIS_URL']}")
    port = int(env.get("PORT", "8000"))
    if embedded_redis.port_answers("127.0.0.1", port):
        port = embedded_redis.free_port()
    subprocess.run(_manage("migrate", "--noinput", "-v", "0"), env=env, check=True)
    logins = subprocess.run(_manage("seed_demo"), env=env, check=True, capture_output=True,
                            text=True).stdout
    children = [
        subprocess.Popen([PYTHON, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
                          "config.asgi:application"], env=env, cwd=BASE_DIR),
        subprocess.Popen(_manage("rqworker", "reconcile", "ingest", "default",
                                 "--with-scheduler"), env=env, cwd=BASE_DIR),
        subprocess.Popen(_manage("rqcron", "config.cron"), env=env, cwd=BASE_DIR),
    ]
    url = f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not embedded_redis.port_answers("127.0.0.1", port):
        time.sleep(0.2)
    print(f"\nAgent governance is running at {url}\n\nDemo logins (user, password, role):")
    print(logins)
    print("Press Ctrl-C to stop.\n", flush=True)

    stopping = False

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    try:
        while not stopping and all(child.poll() is None for child in children):
            time.sleep(0.5)
    finally:
        for child in children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        for child in children:
            try:
                child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                child.kill()
        if started_redis:
            embedded_redis.stop_running(var_dir / "redis")
        print("Stopped.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
