"""`manage.py policy_test DIR`: run each guardrail's test cases kept next to it."""

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from gitsource.policy_tests import PolicyError, run_policy_tests


class Command(BaseCommand):
    help = "Judge example manifests with the guardrails in DIR and compare expected verdicts."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("folder", type=Path)

    def handle(self, *args: Any, folder: Path, **options: Any) -> None:
        if not folder.is_dir():
            raise CommandError(f"{folder}: not a directory")
        try:
            results = run_policy_tests(folder, timezone.now())
        except PolicyError as error:
            raise CommandError(str(error)) from None
        failed = [r for r in results if not r.ok]
        for r in results:
            mark = "ok  " if r.ok else "FAIL"
            said = f" ({r.message})" if r.message and not r.ok else ""
            self.stdout.write(f"{mark} {r.test}: {r.case}: expected {r.expected}, "
                              f"got {r.got}{said}")
        if not results:
            raise CommandError(f"{folder}: no test cases found")
        if failed:
            raise CommandError(f"{len(failed)} of {len(results)} case(s) failed")
        self.stdout.write(f"{len(results)} case(s) passed")
