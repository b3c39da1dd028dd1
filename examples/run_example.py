"""`make example [FRAMEWORK=...]`: find the running demo by itself, register the example agent
as alice, approve it as bob, and run it with its own token in its own process.

Every API token this makes is revoked when it ends, however it ends (the agent finishing,
Ctrl-C, SIGTERM, a step failing), so nothing is left behind that could act later.

    python examples/run_example.py [FRAMEWORK] [agent run options, e.g. --orders 20]

The demo is the one `make demo` started (it writes var/demo.json while it runs, whatever port
it chose); AGENTGOV_URL, when set, names another control plane instead.
"""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # config.private_files: where var/ is (VAR_DIR or beside manage.py)

from agentgov import Client  # noqa: E402
from agentgov.errors import AgentGovError  # noqa: E402

from config.private_files import var_dir  # noqa: E402

PY = sys.executable
FRAMEWORKS = ("langgraph", "openai-agents", "pydantic-ai")
REVOKE_REASON = "make example ended"


class NoDemo(RuntimeError):
    """No running control plane was found where the example looked."""


class Stopped(BaseException):
    """SIGTERM: stop the agent, then clean up (not an Exception, so nothing swallows it)."""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def find_demo(environ: dict[str, str] | None = None) -> str:
    """The control plane's URL: AGENTGOV_URL, or the running `make demo` (var/demo.json);
    either must answer /healthz."""
    environ = os.environ if environ is None else environ
    url = environ.get("AGENTGOV_URL", "").strip()
    if not url:
        path = var_dir() / "demo.json"
        try:
            demo = json.loads(path.read_text())
            url, pid = demo["url"], int(demo["pid"])
        except FileNotFoundError:
            raise NoDemo(f"no demo is running ({path} does not exist): start `make demo` in "
                         "another shell, or set AGENTGOV_URL") from None
        except (ValueError, KeyError, TypeError):
            raise NoDemo(f"{path} is not a demo's address file; start `make demo` again") from None
        if not _alive(pid):
            raise NoDemo(f"the demo that wrote {path} (pid {pid}) is gone: start `make demo` "
                         "in another shell")
    url = url.rstrip("/")
    try:
        answer = httpx.get(f"{url}/healthz", timeout=10)
    except httpx.HTTPError as error:
        raise NoDemo(f"the control plane at {url} does not answer ({error})") from None
    if answer.status_code != 200:
        raise NoDemo(f"the control plane at {url} answered /healthz with {answer.status_code}")
    return url


class Tokens:
    """The API tokens this run issues (through manage.py, as the machine's operator), revoked
    together at the end by the people who hold them."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.people: list[str] = []  # person tokens, in the order made
        self.keys: list[str] = []  # every token made

    def issue(self, username: str, *, name: str, agent: str | None = None) -> str:
        command = [PY, "manage.py", "api_token", username, "--name", name]
        if agent:
            command += ["--agent", agent]
        made = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
        if made.returncode != 0:
            raise RuntimeError(f"could not issue {username}'s token: {made.stderr.strip()}")
        key = made.stdout.strip()
        self.keys.append(key)
        if agent is None:
            self.people.append(key)
        return key

    def revoke_all(self) -> list[str]:
        """Revoke every token made; each person revokes the ones they may see (their own and
        their agents'), their own last. Returns the prefixes still live (none, normally)."""
        left = {key[:8] for key in self.keys}
        for key in reversed(self.people):
            try:
                with Client(self.url, token=key) as client:
                    mine = [t for t in client.tokens()
                            if t["prefix"] in left and t["status"] != "revoked"]
                    for token in sorted(mine, key=lambda t: t["prefix"] == key[:8]):
                        client.revoke_token(token["id"], reason=REVOKE_REASON)
                        left.discard(token["prefix"])
            except (AgentGovError, httpx.HTTPError) as error:
                print(f"could not revoke with {key[:8]}...: {error}", file=sys.stderr)
        return sorted(left)


def run_agent(agent_py: Path, args: list[str], env: dict[str, str]) -> int:
    """Run the agent in its own process until it ends; SIGTERM or Ctrl-C stops it first."""
    process = subprocess.Popen([PY, str(agent_py), "run", *args], cwd=ROOT, env=env)
    try:
        return process.wait()
    except (KeyboardInterrupt, Stopped):
        # Ctrl-C reached the agent too (one process group); SIGTERM is passed on.
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        return 130


def example(framework: str | None) -> tuple[str, Path]:
    """The example's agent name and program."""
    if framework is None:
        return "refund-bot", ROOT / "examples" / "refund_agent" / "agent.py"
    if framework not in FRAMEWORKS:
        raise SystemExit(f"no example for {framework!r}: one of {', '.join(FRAMEWORKS)}")
    return f"refund-{framework}", ROOT / "examples" / f"{framework.replace('-', '_')}_agent" / \
        "agent.py"


def main(argv: list[str]) -> int:
    framework = argv[0] if argv and not argv[0].startswith("-") else None
    run_args = argv[1:] if framework else argv
    name, agent_py = example(framework)

    def stop(*_: object) -> None:
        raise Stopped

    signal.signal(signal.SIGTERM, stop)
    try:
        url = find_demo()
    except NoDemo as error:
        print(f"make example: {error}", file=sys.stderr)
        return 2
    print(f"==> Using the control plane at {url}", flush=True)
    tokens = Tokens(url)
    status = 1
    try:
        alice = tokens.issue("alice", name=f"{name}-example")
        bob = tokens.issue("bob", name=f"{name}-example")
        env = {**os.environ, "AGENTGOV_URL": url}
        registered = subprocess.run([PY, str(agent_py), "register", "--token", alice], cwd=ROOT,
                                    env=env, capture_output=True, text=True)
        if registered.returncode != 0:
            raise RuntimeError(f"registering {name} failed:\n{registered.stderr}")
        if proposal := registered.stdout.strip():
            with Client(url, token=bob) as client:
                client.approve(int(proposal), comment=f"worked example ({framework or 'plain'})")
            print(f"==> {name} registered by alice, approved by bob", flush=True)
        agent_token = tokens.issue("alice", name=name, agent=name)
        print(f"==> Running {name} (Ctrl-C stops it)", flush=True)
        status = run_agent(agent_py, run_args, {**env, "AGENTGOV_TOKEN": agent_token,
                                                "AGENTGOV_AGENT": name})
    except (RuntimeError, AgentGovError, httpx.HTTPError) as error:
        print(f"make example: {error}", file=sys.stderr)
    except (KeyboardInterrupt, Stopped):
        status = 130
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # cleaning up: let it finish
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        left = tokens.revoke_all()
        if left:
            print(f"make example: tokens still live: {', '.join(left)} (revoke them on the "
                  "Tokens page)", file=sys.stderr)
            status = status or 1
        else:
            print(f"==> Revoked the {len(tokens.keys)} API token(s) this example made", flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
