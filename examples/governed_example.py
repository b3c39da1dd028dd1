"""The command line shared by the framework examples (examples/*_agent/agent.py): `register`
proposes the example's manifest as its owner; `run` works through a stream of orders, asking the
governed agent to look each up and to refund every third one (a few above $500)."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentgov import Client

REFUNDS = [120.0, 80.0, 640.0, 45.0, 310.0, 900.0, 60.0, 150.0]
# The control plane's resource behind each tool, which the gate checks against the approved
# data scopes and puts on each behaviour event.
RESOURCES = {"orders.lookup": "orders_db", "payments.refund": "payments"}
log = logging.getLogger("example")


def requests(orders: int):
    """What the agent is asked, order by order."""
    for number in range(1, orders + 1):
        order = f"order-{number:04d}"
        if number % 3 == 0:
            yield f"refund {order} {REFUNDS[(number // 3 - 1) % len(REFUNDS)]:g}"
        else:
            yield f"lookup {order}"


def run(args: argparse.Namespace, governed: Callable[[], tuple[Any, Any]],
        ask: Callable[[Any, str], str]) -> int:
    agent, governor = governed()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        for text in requests(args.orders):
            if stop.is_set():
                break
            log.info("%s -> %s", text, ask(agent, text))
            stop.wait(args.pause)
        if args.linger:
            stop.wait(args.linger)  # keep answering corrections
    except KeyboardInterrupt:
        pass
    finally:
        governor.stop()
        governor.client.close()
    return 0


def register(here: Path, token: str) -> int:
    """The owner proposes the example's manifest; prints the proposal id."""
    client = Client(os.environ.get("AGENTGOV_URL", "http://127.0.0.1:8000"), token=token)
    result = client.apply_manifests((here / "manifest.yaml").read_text())["results"][0]
    print(result["proposal"] or "")
    return 0


def main(here: Path, governed: Callable[[], tuple[Any, Any]], ask: Callable[[Any, str], str],
         argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    parser = argparse.ArgumentParser(description="a governed refund agent")
    sub = parser.add_subparsers(dest="command", required=True)
    run_parser = sub.add_parser("run")
    run_parser.add_argument("--orders", type=int, default=1000)
    run_parser.add_argument("--pause", type=float, default=1.0)
    run_parser.add_argument("--linger", type=float, default=0.0)
    sub.add_parser("register").add_argument("--token", required=True)
    args = parser.parse_args(argv)
    if args.command == "register":
        return register(here, args.token)
    return run(args, governed, ask)
