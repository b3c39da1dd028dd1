"""The `git` command line, as the poller uses it: fetch a branch into a cache, read files and
history, verify SSH commit signatures. Every call is a subprocess with an argument list (no
shell), a time limit, no terminal prompt and only the transports a source may use. Pure
Python, no Django.
"""

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

SHA = re.compile(r"^[0-9a-f]{40}$")
BRANCH = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,199}$")
MAX_MANIFEST_BYTES = 1_048_576
# Only these transports, whatever the URL or a repository's config asks (ext:: runs commands).
TRANSPORTS = ("file", "http", "https", "ssh")


class GitError(RuntimeError):
    """A git command failed, timed out, or answered something we cannot read."""


@dataclass(frozen=True)
class Commit:
    """One commit as a proposal names it."""

    sha: str
    author: str
    email: str
    subject: str


def _environment(extra_config: dict[str, str]) -> dict[str, str]:
    config = {"protocol.allow": "never", "http.followRedirects": "false",
              "core.hooksPath": "/dev/null", "credential.helper": "",
              **{f"protocol.{t}.allow": "always" for t in TRANSPORTS}, **extra_config}
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/nonexistent",
           "LANG": "C", "GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_SSH_COMMAND": "ssh -o BatchMode=yes",
           "GIT_CONFIG_COUNT": str(len(config))}
    # Through the environment, not `-c`: a credential never shows in the process list.
    for index, (key, value) in enumerate(config.items()):
        env[f"GIT_CONFIG_KEY_{index}"] = key
        env[f"GIT_CONFIG_VALUE_{index}"] = value
    return env


def run(repo: Path, *args: str, timeout: float = 30, config: dict[str, str] | None = None,
        check: bool = True) -> subprocess.CompletedProcess:
    """`git -C repo ARGS`; GitError when it fails (with check), times out or cannot start."""
    try:
        done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True,
                              timeout=timeout, env=_environment(config or {}), check=False)
    except subprocess.TimeoutExpired:
        raise GitError(f"git {args[0]} took longer than {timeout:g} s") from None
    except OSError as error:
        raise GitError(f"git could not run: {error}") from None
    if check and done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise GitError(f"git {args[0]} failed: {message[-1] if message else done.returncode}")
    return done


def fetch(cache: Path, url: str, branch: str, *, timeout: float,
          config: dict[str, str] | None = None) -> str:
    """Fetch `branch` of `url` into the bare repository `cache` (made on first use), forced:
    a rewritten branch is fetched as it now is. Returns the branch's head commit."""
    if not BRANCH.match(branch) or ".." in branch or branch.endswith((".lock", "/")):
        raise GitError(f"{branch!r} is not a branch name")
    if url.startswith("-"):
        raise GitError("a repository URL cannot start with '-'")
    if not (cache / "HEAD").exists():
        cache.mkdir(parents=True, exist_ok=True)
        run(cache, "init", "--bare", "--quiet", timeout=timeout)
    ref = f"refs/source/{branch}"
    run(cache, "fetch", "--quiet", "--force", "--no-tags", "--no-recurse-submodules",
        "--no-write-fetch-head", url, f"+refs/heads/{branch}:{ref}", timeout=timeout,
        config=config)
    return rev_parse(cache, ref)


def rev_parse(cache: Path, ref: str) -> str:
    """The commit a ref names."""
    sha = run(cache, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}").stdout.decode()
    sha = sha.strip()
    if not SHA.match(sha):
        raise GitError(f"{ref} names no commit")
    return sha


def is_ancestor(cache: Path, older: str, newer: str) -> bool:
    """True when `older` is in `newer`'s history (False when `older` is gone altogether)."""
    return run(cache, "merge-base", "--is-ancestor", older, newer, check=False).returncode == 0


def manifest_paths(cache: Path, sha: str, folder: str) -> list[str]:
    """Every YAML or JSON file under `folder` at commit `sha`, in name order."""
    args = ["ls-tree", "-r", "-z", "--name-only", sha]
    if folder:
        args += ["--", folder.strip("/") + "/"]
    names = run(cache, *args).stdout.decode("utf-8", "replace").split("\0")
    return sorted(n for n in names if n.endswith((".yaml", ".yml", ".json")))


def read_file(cache: Path, sha: str, path: str) -> str:
    """A file's text at a commit; GitError when it is too large or not UTF-8."""
    size = run(cache, "cat-file", "-s", f"{sha}:{path}").stdout.decode().strip()
    if not size.isdigit() or int(size) > MAX_MANIFEST_BYTES:
        raise GitError(f"{path} is over {MAX_MANIFEST_BYTES} bytes")
    try:
        return run(cache, "cat-file", "blob", f"{sha}:{path}").stdout.decode("utf-8")
    except UnicodeDecodeError:
        raise GitError(f"{path} is not UTF-8 text") from None


def last_commit(cache: Path, sha: str, path: str) -> Commit:
    """The latest commit in `sha`'s history that changed `path`."""
    out = run(cache, "log", "-1", "--format=%H%x00%an%x00%ae%x00%s", sha, "--", path).stdout
    fields = out.decode("utf-8", "replace").rstrip("\n").split("\0")
    if len(fields) != 4 or not SHA.match(fields[0]):
        raise GitError(f"no commit changed {path}")
    return Commit(*fields)


def verify_signature(cache: Path, sha: str, allowed_signers: Path) -> str | None:
    """The principal whose SSH key signed `sha`, when `allowed_signers` lists that key; None
    for an unsigned commit, a bad signature or an unknown key."""
    config = {"gpg.format": "ssh", "gpg.ssh.allowedSignersFile": str(allowed_signers)}
    if run(cache, "verify-commit", sha, config=config, check=False).returncode != 0:
        return None
    out = run(cache, "log", "-1", "--format=%G?%x00%GS", sha, config=config).stdout
    status, _, principal = out.decode("utf-8", "replace").strip().partition("\0")
    return principal if status == "G" and principal else None
