"""`manage.py policy_test DIR`: run each guardrail's test cases kept next to it."""

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from gitsource.policy_tests import PolicyError, run_policy_tests

EXIT_FAILED, EXIT_UNREADABLE = 1, 2


class Command(BaseCommand):
    help = ("Judge example manifests with the guardrails in DIR and compare expected verdicts "
            "(exit 0: every case holds; 1: a case failed; 2: a document cannot be read).")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("folder", type=Path)

    def handle(self, *args: Any, folder: Path, **options: Any) -> None:
        if not folder.is_dir():
            raise CommandError(f"{folder}: not a directory", returncode=EXIT_UNREADABLE)
        try:
            results = run_policy_tests(folder, timezone.now())
        except PolicyError as error:
            raise CommandError(str(error), returncode=EXIT_UNREADABLE) from None
        failed = [r for r in results if not r.ok]
        for result in results:
            self.stdout.write(result.line)
        if not results:
            raise CommandError(f"{folder}: no test cases found", returncode=EXIT_UNREADABLE)
        if failed:
            raise CommandError(f"{len(failed)} of {len(results)} case(s) failed",
                               returncode=EXIT_FAILED)
        self.stdout.write(f"{len(results)} case(s) passed")
