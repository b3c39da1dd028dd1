"""`manage.py apply -f FILE_OR_DIR [--dry-run] [--as USER]`: kubectl-like manifest apply."""

import getpass
from pathlib import Path
from typing import Any

from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from config.errors import DomainError
from registry import actions
from registry.choices import VersionSource
from registry.intake import read_manifests

SUFFIXES = (".yaml", ".yml", ".json")


def manifest_files(target: Path) -> list[Path]:
    """The file itself, or every manifest file under a directory, in name order."""
    if target.is_dir():
        return sorted(p for p in target.rglob("*") if p.suffix in SUFFIXES and p.is_file())
    if target.is_file():
        return [target]
    raise CommandError(f"{target}: no such file or directory")


class Command(BaseCommand):
    help = "Register agents and propose desired-state versions from manifest files."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("-f", "--filename", required=True, type=Path,
                            help="a manifest file or a directory of them")
        parser.add_argument("--dry-run", action="store_true",
                            help="validate and diff only; change nothing")
        parser.add_argument("--as", dest="as_user", default=None,
                            help="the proposing owner (default: each manifest's metadata.owner)")

    def handle(self, *args: Any, filename: Path, dry_run: bool, as_user: str | None,
               **options: Any) -> None:
        manifests = []
        for path in manifest_files(filename):
            try:
                manifests.extend(read_manifests(path.read_text(encoding="utf-8")))
            except DomainError as error:
                lines = [f"{path}: {error.message}" if not error.details else
                         f"{path}: {len(error.details)} problem(s)"]
                for d in error.details:
                    where = f" (line {d['line']})" if d.get("line") else ""
                    lines.append(f"  {d['pointer'] or '/'}{where}: {d['message']}")
                raise CommandError("\n".join(lines)) from None
        if not manifests:
            raise CommandError(f"{filename}: no manifests found")
        # Whoever has this shell can act as any owner: say so on every proposal and audit row.
        origin = (f"command line (manage.py apply) run by OS user {getpass.getuser()}, "
                  + (f"--as {as_user}" if as_user else "no --as: as each manifest's owner"))
        outcomes = []
        try:
            with transaction.atomic():  # all or nothing, as through the API
                for manifest in manifests:
                    username = as_user or manifest.owner
                    actor = User.objects.filter(username=username, is_active=True).first()
                    if actor is None:
                        raise CommandError(f"{manifest.name}: no active user {username!r}; "
                                           "nothing was applied")
                    outcomes.extend(actions.apply_manifests(
                        [manifest], actor=actor, source=VersionSource.YAML, dry_run=dry_run,
                        origin=origin))
        except DomainError as error:
            raise CommandError(f"{error.message}; nothing was applied") from None
        suffix = " (dry run)" if dry_run else ""
        for outcome in outcomes:
            proposal = f" as proposal {outcome.version.pk}" if (
                outcome.version and not dry_run and outcome.action != "unchanged") else ""
            self.stdout.write(f"agent/{outcome.agent} {outcome.action}{proposal}{suffix}")
            if outcome.assessment:
                for change in outcome.assessment.changes:
                    self.stdout.write(f"  {change['text']}")
                for result in outcome.assessment.guardrails:
                    if result.outcome != "passed":
                        self.stdout.write(f"  guardrail {result.guardrail}: {result.outcome}"
                                          f" ({result.message})")
