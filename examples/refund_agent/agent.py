"""A runnable refund agent: deterministic (no model download), wired to the control plane
through the agentgov client.

It works through a stream of simulated orders: it looks orders up, and refunds damaged ones.
Before any refund above its approval threshold it asks the control plane for a decision and
waits for a human; it reports every tool call, data access and refund as behaviour events; and
its sidecar (`watch`) keeps its configuration (a JSON file standing in for a deployment) equal
to the approved desired state, so corrections reach the agent itself.

    python agent.py register --token OWNER_TOKEN     # propose the manifest (an approver approves)
    python agent.py run [--orders N]                 # AGENTGOV_URL / AGENTGOV_TOKEN (agent token)
    python agent.py deploy-bad                       # a "deployment" that widens its access
"""

import argparse
import json
import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from agentgov import Client, DesiredState

HERE = Path(__file__).resolve().parent
STATE_FILE = Path(os.environ.get("REFUND_AGENT_STATE", HERE.parent.parent / "var" /
                                 "refund-bot-deployment.json"))
# The same refunds every run: (order, amount); a few need a human sign-off above $500.
REFUNDS = [120.0, 80.0, 640.0, 45.0, 310.0, 900.0, 60.0, 150.0]
log = logging.getLogger("refund-bot")


def read_deployment() -> dict[str, Any]:
    """What the agent really runs with (the deployment file), or nothing yet."""
    try:
        return json.loads(STATE_FILE.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


def write_deployment(state: dict[str, Any]) -> None:
    STATE_FILE.parent.mkdir(parents=True, exist_ok=True)
    temporary = STATE_FILE.with_suffix(".tmp")
    temporary.write_text(json.dumps(state, indent=2, sort_keys=True))
    temporary.replace(STATE_FILE)


def apply(desired: DesiredState) -> dict[str, Any]:
    """The sidecar's callback: deploy exactly the desired state."""
    state = desired.as_observed()
    write_deployment(state)
    log.info("applied generation %s (%d pending correction(s))", desired.generation,
             len(desired.corrections))
    return state


def refund_threshold(deployment: dict[str, Any]) -> float | None:
    limits = deployment.get("actions", {}).get("payments.refund", {})
    return limits.get("approval_above")


def work(client: Client, orders: int, stop: threading.Event, pause: float) -> None:
    """Process orders: look each up; refund the damaged ones, asking before big refunds."""
    for number in range(1, orders + 1):
        if stop.is_set():
            return
        order = f"order-{number:04d}"
        deployment = read_deployment()
        client.tool_call("orders.lookup", resource="orders_db", record=order)
        if number % 3 == 0:
            amount = REFUNDS[(number // 3 - 1) % len(REFUNDS)]
            threshold = refund_threshold(deployment)
            decision_id = ""
            if threshold is not None and amount > threshold:
                # The arguments as the tool gets them: the control plane reads the amount.
                decision = client.decide(tool="payments.refund",
                                         arguments={"order": order, "amount": amount},
                                         wait_seconds=120)
                log.info("%s: refund of $%.0f needs sign-off: %s (%s)", order, amount,
                         decision.outcome, decision.rule)
                if not decision.allowed:
                    continue
                decision_id = decision.id
            client.action("payments.refund", amount=amount, resource="payments",
                          decision_id=decision_id or None)
            log.info("%s: refunded $%.0f", order, amount)
        time.sleep(pause)


class Terminated(BaseException):
    """SIGTERM arrived: stop working (exit 0, as a stopped deployment does). Not an Exception,
    so no `except Exception` on the way (a retry, a client) can swallow it."""


def run(args: argparse.Namespace) -> int:
    client = Client.from_env()
    stop = threading.Event()

    def terminate(*_: object) -> None:
        # Raised in the main thread, so it also ends a wait for a human's decision (a long
        # poll of up to two minutes) instead of leaving the agent deaf until it returns.
        stop.set()
        raise Terminated

    signal.signal(signal.SIGTERM, terminate)
    sidecar = threading.Thread(target=client.watch, daemon=True, kwargs={
        "apply": apply, "observe": read_deployment, "interval": args.interval,
        "restore_drift": False, "stop": stop})
    sidecar.start()
    try:
        work(client, args.orders, stop, args.pause)
        if args.linger:
            stop.wait(args.linger)  # keep the sidecar answering corrections
    except (KeyboardInterrupt, Terminated):
        log.info("stopping")
    finally:
        signal.signal(signal.SIGTERM, lambda *_: stop.set())  # a second one waits for close()
        stop.set()
        client.close()
    return 0


def register(args: argparse.Namespace) -> int:
    """The owner proposes the example's manifest; prints the proposal id."""
    client = Client(os.environ.get("AGENTGOV_URL", "http://127.0.0.1:8000"), token=args.token)
    result = client.apply_manifests((HERE / "manifest.yaml").read_text())["results"][0]
    print(result["proposal"] or "")
    return 0


def deploy_bad(args: argparse.Namespace) -> int:
    """A deployment that quietly grants CRM access and drops the $500 rule."""
    state = read_deployment()
    if not state:
        print("the agent has not deployed yet", file=sys.stderr)
        return 1
    state["tools"] = sorted({*state.get("tools", []), "crm.search"})
    state["data"] = [*state.get("data", []), {"resource": "crm", "access": "write"}]
    state.setdefault("actions", {})["payments.refund"] = {"max": 5000}
    write_deployment(state)
    print("deployed: crm write, crm.search, and no refund threshold")
    return 0


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request is noise
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run_parser = sub.add_parser("run")
    run_parser.add_argument("--orders", type=int, default=1000)
    run_parser.add_argument("--pause", type=float, default=1.0)
    run_parser.add_argument("--interval", type=float, default=2.0)
    run_parser.add_argument("--linger", type=float, default=0.0)
    register_parser = sub.add_parser("register")
    register_parser.add_argument("--token", required=True)
    sub.add_parser("deploy-bad")
    args = parser.parse_args(argv)
    return {"run": run, "register": register, "deploy-bad": deploy_bad}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
