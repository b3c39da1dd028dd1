"""Real Git repositories for the tests: a bare origin, a working clone that commits (signed
with SSH keys when asked) and pushes, and a loopback smart-HTTP server (`git http-backend`)
with a tiny commit-status endpoint that keeps each status as a git note on the commit."""

import json
import os
import re
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from tests.conftest import REFUND_AGENT_YAML

NOTES = "refs/notes/commit-status"


def git(cwd: Path, *args: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=60,
                          env={"PATH": os.environ["PATH"], "HOME": str(cwd),
                               "GIT_CONFIG_NOSYSTEM": "1", **(env or {})})
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
    return done.stdout.strip()


class Repo:
    """A bare origin under `root` and a clone that commits to it, as a team member does."""

    def __init__(self, root: Path, name: str = "agents") -> None:
        self.root = root
        self.bare = root / f"{name}.git"
        self.work = root / f"{name}-work"
        self.bare.mkdir(parents=True)
        git(self.bare, "init", "--bare", "--quiet", "--initial-branch=main")
        git(self.bare, "config", "http.receivepack", "true")
        self.work.mkdir()
        git(self.work, "init", "--quiet", "--initial-branch=main")
        git(self.work, "remote", "add", "origin", str(self.bare))
        self.author("Alice Owner", "alice@example.com")

    def author(self, name: str, email: str, key: Path | None = None) -> None:
        git(self.work, "config", "user.name", name)
        git(self.work, "config", "user.email", email)
        if key is None:
            git(self.work, "config", "commit.gpgsign", "false")
            return
        git(self.work, "config", "gpg.format", "ssh")
        git(self.work, "config", "user.signingkey", str(key))
        git(self.work, "config", "commit.gpgsign", "true")

    def commit(self, files: dict[str, str | None], message: str) -> str:
        for path, text in files.items():
            target = self.work / path
            if text is None:
                target.unlink()
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
        git(self.work, "add", "-A")
        git(self.work, "commit", "--quiet", "-m", message)
        return git(self.work, "rev-parse", "HEAD")

    def push(self, force: bool = False) -> None:
        git(self.work, "push", "--quiet", *(["--force"] if force else []), "origin", "main")

    def reset_hard(self, sha: str) -> None:
        git(self.work, "reset", "--quiet", "--hard", sha)

    def statuses(self, sha: str) -> list[dict]:
        """The commit statuses the control plane sent for `sha`, oldest first."""
        done = subprocess.run(["git", "-C", str(self.bare), "notes", "--ref", NOTES, "show",
                               sha], capture_output=True, text=True, timeout=30)
        if done.returncode != 0:
            return []
        return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


def signing_key(root: Path, name: str) -> tuple[Path, str]:
    """A fresh ed25519 key pair: (private key path, public key line)."""
    key = root / f"{name}-key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(key)],
                   check=True, timeout=30)
    return key, (root / f"{name}-key.pub").read_text().strip()


def manifest(*changes: tuple[str, str]) -> str:
    """The refund agent's manifest, with each (old, new) text replaced."""
    text = REFUND_AGENT_YAML
    for old, new in changes:
        assert old in text
        text = text.replace(old, new)
    return text


class GitHost(ThreadingHTTPServer):
    """Smart HTTP for every bare repository under `root`, and `POST /status/<repo>/statuses/
    <sha>` (GitHub's shape) or `/api/v4/projects/<repo>/statuses/<sha>` (GitLab's) storing
    each status body as a line of a git note on the commit."""

    daemon_threads = True

    def __init__(self, root: Path) -> None:
        self.root = root
        self.received: list[dict] = []
        super().__init__(("127.0.0.1", 0), _Handler)
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


class _Handler(BaseHTTPRequestHandler):
    server: GitHost

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        self._backend()

    def do_POST(self) -> None:
        status = re.fullmatch(r"/(?:status|api/v4/projects)/([\w.-]+\.git)/statuses/"
                              r"([0-9a-f]{40})", self.path)
        if status:
            self._status(status.group(1), status.group(2))
        else:
            self._backend()

    def _status(self, repo: str, sha: str) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.received.append({"sha": sha, **body})
        subprocess.run(["git", "-C", str(self.server.root / repo), "notes", "--ref", NOTES,
                        "append", "-m", json.dumps(body, sort_keys=True), sha],
                       check=True, capture_output=True, timeout=30,
                       env={"PATH": os.environ["PATH"], "HOME": str(self.server.root),
                            "GIT_AUTHOR_NAME": "status", "GIT_AUTHOR_EMAIL": "s@example.com",
                            "GIT_COMMITTER_NAME": "status",
                            "GIT_COMMITTER_EMAIL": "s@example.com"})
        self.send_response(201)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _backend(self) -> None:
        path, _, query = self.path.partition("?")
        length = int(self.headers.get("Content-Length") or 0)
        env = {"PATH": os.environ["PATH"], "GIT_PROJECT_ROOT": str(self.server.root),
               "GIT_HTTP_EXPORT_ALL": "1", "PATH_INFO": path, "QUERY_STRING": query,
               "REQUEST_METHOD": self.command, "REMOTE_ADDR": "127.0.0.1",
               "CONTENT_TYPE": self.headers.get("Content-Type", ""),
               "CONTENT_LENGTH": str(length), "GIT_PROTOCOL": self.headers.get(
                   "Git-Protocol", "")}
        done = subprocess.run(["git", "http-backend"], input=self.rfile.read(length), env=env,
                              capture_output=True, timeout=60)
        head, _, body = done.stdout.partition(b"\r\n\r\n")
        code, headers = 200, []
        for line in head.decode("latin-1").split("\r\n"):
            name, _, value = line.partition(":")
            if name.lower() == "status":
                code = int(value.strip().split()[0])
            elif name:
                headers.append((name, value.strip()))
        self.send_response(code)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
