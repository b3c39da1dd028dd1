"""`manage.py audit verify|export|checkpoint`: the operator's view of the trail."""

import getpass
import json
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from audit.actions import checkpoint_head, sign_for_export
from audit.export import FORMATS, export_chunks
from audit.verify import verify_trail


def _os_user() -> str:
    """Who ran the command, as the operating system knows them (containers may not)."""
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return "unknown"


class Command(BaseCommand):
    help = "Verify, export or checkpoint the audit trail."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="verb", required=True)
        sub.add_parser("verify", help="walk the chain; exit 1 and name the first broken seq")
        export = sub.add_parser("export", help="write the trail as JSONL or CSV")
        export.add_argument("--format", choices=sorted(FORMATS), default="jsonl")
        export.add_argument("--output", "-o", default="-", help="file path, or - for stdout")
        sub.add_parser("checkpoint", help="sign the current head now")

    def handle(self, *args: Any, **options: Any) -> None:
        verb = options["verb"]
        if verb == "verify":
            report = verify_trail()
            self.stdout.write(json.dumps(report.to_dict()))
            if not report.ok:
                raise CommandError(f"audit trail broken at seq {report.first_broken_seq}")
        elif verb == "export":
            # recorded first, as through the API, then signed: the file proves its own export
            size = sign_for_export(actor=f"system:manage.py ({_os_user()})",
                                   target="audit:trail", after={"format": options["format"]})
            out = sys.stdout if options["output"] == "-" else open(  # noqa: SIM115
                options["output"], "w", encoding="utf-8", newline=""
            )
            try:
                for chunk in export_chunks(options["format"], size):
                    out.write(chunk)
            finally:
                if out is not sys.stdout:
                    out.close()
        elif verb == "checkpoint":
            made = checkpoint_head()
            self.stdout.write(f"signed entry {made.seq}" if made else "head already signed")
