"""`make demo` from a fresh clone, timed to the URL: clones this repository's HEAD into a
temporary directory, runs `make demo` there (its own .venv, SQLite and embedded Redis, with
pip's cache as it is on this machine: warm after any earlier install), and times each step the
launcher announces until it prints the URL. Prints one JSON line, then stops the demo and
removes the copy.

Usage: python bench/demo_start.py [--keep]   (--keep leaves the copy, to look at var/logs/)
"""

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET_SECONDS = 90  # issue: the URL in under 90 s on a 2-core machine, warm package cache
STEPS = {"install": r"==> Installing the product", "migrate": r"==> Migrating",
         "seed": r"==> Seeding", "start": r"==> Starting"}
GIVE_UP_SECONDS = 1800


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    copy = Path(tempfile.mkdtemp(prefix="agentgov-demo-start-"))
    clone = copy / "clone"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
    env = {k: v for k, v in os.environ.items()
           if k not in ("DATABASE_URL", "REDIS_URL", "VAR_DIR", "VIRTUAL_ENV")}
    env.update(PORT=str(free_port()), PYTHONUNBUFFERED="1")
    began = time.monotonic()
    demo = subprocess.Popen(["make", "demo"], cwd=clone, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    seen: dict[str, float] = {}
    url, output = None, []
    try:
        for line in demo.stdout:
            output.append(line)
            at = time.monotonic() - began
            for step, pattern in STEPS.items():
                if step not in seen and re.search(pattern, line):
                    seen[step] = round(at, 1)
            if match := re.search(r"running at (http://\S+)", line):
                url, seen["url"] = match.group(1), round(at, 1)
                break
            if at > GIVE_UP_SECONDS:
                break
    finally:
        if demo.poll() is None:
            os.killpg(demo.pid, signal.SIGINT)  # Ctrl-C, as a person stops it
            try:
                demo.wait(timeout=120)
            except subprocess.TimeoutExpired:
                os.killpg(demo.pid, signal.SIGKILL)
                demo.wait()
        if not args.keep:
            shutil.rmtree(copy, ignore_errors=True)
    print(json.dumps({
        "bench": "demo_start",
        "seconds_to_url": seen.get("url"),
        "target_seconds": TARGET_SECONDS,
        "step_started_at": {step: seen.get(step) for step in STEPS},
        "url": url,
        "load_1m": round(os.getloadavg()[0], 1),
        "cpus": os.cpu_count(),
        **({"copy": str(copy)} if args.keep else {}),
        **({} if url else {"output_tail": "".join(output[-30:])}),
    }), flush=True)
    return 0 if url else 1


if __name__ == "__main__":
    sys.exit(main())
