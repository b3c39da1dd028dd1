"""`agentgov`: the one command an installed control plane is run with.

    agentgov migrate                      create or upgrade the database
    agentgov serve [--host H] [--port P]  a web process (ASGI: HTTP and websockets)
    agentgov worker [QUEUE ...]           a worker (every queue, and the scheduler, by default)
    agentgov cron                         the periodic jobs (run one per host: one leads)
    agentgov check                        Django's deployment checks, ours, the database and Redis
    agentgov manage COMMAND [ARGS ...]    any other management command

Settings come from the environment (docs/configuration.md lists them), after the KEY=VALUE
lines of the file named by --env-file or AGENTGOV_ENV_FILE (the environment wins).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from django.core.management import execute_from_command_line

from config import process_role, startup

QUEUES = ("reconcile", "ingest", "default")


def read_env_file(path: Path) -> dict[str, str]:
    """KEY=VALUE lines; blank lines and # comments skipped; quotes around a value removed."""
    values = {}
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.removeprefix("export ").partition("=")
        if not sep or not key.strip().isidentifier():
            raise SystemExit(f"{path}:{number}: expected KEY=VALUE; got {raw!r}")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        values[key.strip()] = value
    return values


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="agentgov", description=__doc__.split("\n\n")[0],
                                  formatter_class=argparse.RawDescriptionHelpFormatter,
                                  epilog=__doc__.split("\n\n", 1)[1])
    top.add_argument("--env-file", type=Path, default=os.environ.get("AGENTGOV_ENV_FILE"),
                     help="KEY=VALUE settings (the environment wins)")
    commands = top.add_subparsers(dest="command", required=True)
    commands.add_parser("migrate", help="create or upgrade the database")
    serve = commands.add_parser("serve", help="a web process (daphne)")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on")
    serve.add_argument("--port", type=int, default=8000)
    worker = commands.add_parser("worker", help="a worker")
    worker.add_argument("queues", nargs="*", metavar="QUEUE",
                        help=f"queues to work, of {', '.join(QUEUES)} (default: all)")
    commands.add_parser("cron", help="the periodic jobs")
    commands.add_parser("check", help="deployment checks, the database and Redis")
    manage = commands.add_parser("manage", help="any management command")
    manage.add_argument("args", nargs=argparse.REMAINDER)
    return top


def management_argv(options: argparse.Namespace) -> list[str]:
    """The manage.py arguments a command stands for."""
    queues = getattr(options, "queues", None) or list(QUEUES)
    if unknown := [queue for queue in queues if queue not in QUEUES]:
        raise SystemExit(f"agentgov worker: no queue {unknown[0]!r} (queues: {', '.join(QUEUES)})")
    return {
        "migrate": ["migrate", "--no-input"],
        "worker": ["rqworker", *queues, "--with-scheduler"],
        "cron": ["cron"],
        "check": ["check", "--deploy", "--database", "default", "--fail-level", "ERROR"],
        "manage": list(getattr(options, "args", [])),
    }[options.command]


def main(argv: list[str] | None = None) -> None:
    startup.pause_collector()  # until django.setup() ends (config/startup.py)
    options = parser().parse_args(argv)
    if options.env_file:
        for key, value in read_env_file(options.env_file).items():
            os.environ.setdefault(key, value)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    if options.command == "serve":
        # daphne's server installs Twisted's reactor and reads ASGI_THREADS as it is imported:
        # only for `serve`, and after the env file is read
        from daphne.cli import CommandLineInterface

        CommandLineInterface().run(["-b", options.host, "-p", str(options.port),
                                    "config.asgi:application"])
        return
    command = management_argv(options)
    process_role.mark_command(command[0] if command else "help")
    execute_from_command_line(["agentgov", *command])


if __name__ == "__main__":
    main(sys.argv[1:])
