"""`manage.py audit verify|export|archive|checkpoint|publish|public-key|trusted-keys|rotate-key`:
the operator's view of the trail and its signing key."""

import getpass
import json
import sys
from datetime import UTC, datetime, time
from pathlib import Path
from typing import Any

from agentgov import checkpoints
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils.dateparse import parse_date

from audit import keys, signer, witnesses
from audit.actions import (
    archive_before,
    checkpoint_head,
    refuse_signing,
    rotate_key,
    sign_for_export,
)
from audit.choices import SignatureAlgorithm
from audit.export import FORMATS, export_chunks
from audit.models import AuditCheckpoint
from audit.verify import verify_trail
from config.times import parse_timestamp


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
        verify = sub.add_parser("verify", help="walk the chain; exit 1 and name the first "
                                               "broken seq")
        verify.add_argument("--tree", action="store_true",
                            help="also check every stored Merkle tree node, not only those "
                                 "roots are made from")
        export = sub.add_parser("export", help="write the trail as JSONL or CSV")
        export.add_argument("--format", choices=sorted(FORMATS), default="jsonl")
        export.add_argument("--output", "-o", default="-", help="file path, or - for stdout")
        archive = sub.add_parser("archive", help="move the entries up to the newest signed "
                                                 "checkpoint before DATE to a file in DIR that "
                                                 "verifies offline, then delete them here")
        archive.add_argument("--before", required=True, metavar="DATE",
                             help="YYYY-MM-DD (UTC midnight) or an ISO 8601 time")
        archive.add_argument("--to", required=True, metavar="DIR", dest="directory")
        sub.add_parser("checkpoint", help="sign the current head now")
        sub.add_parser("publish", help="hand the checkpoints signed before a witness was "
                                       "added (or before an upgrade that brought witnesses) "
                                       "to every witness; refused while the trail is broken")
        public = sub.add_parser("public-key", help="print the current signing key's public half")
        public.add_argument("--format", choices=["pem", "base64", "json"], default="pem")
        sub.add_parser("trusted-keys", help="print the trusted key list verify uses (from "
                                             "AUDIT_TRUSTED_KEYS_FILE), to hand to auditors")
        rotate = sub.add_parser("rotate-key", help="switch to a fresh signing key; the rotation "
                                                   "is an audit entry signed by the old key")
        rotate.add_argument("--output", help="where to write the new private key (required "
                                             "when the key comes from AUDIT_PRIVATE_KEY)")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            self._handle(options)
        except signer.SigningRefused as error:
            refuse_signing(error)
            raise CommandError(f"signing refused: {error.message}") from error

    def _handle(self, options: dict[str, Any]) -> None:
        verb = options["verb"]
        if verb == "verify":
            report = verify_trail(full_tree=options["tree"])
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
        elif verb == "archive":
            self._archive(options["before"], Path(options["directory"]))
        elif verb == "checkpoint":
            made = checkpoint_head()
            self.stdout.write(f"signed entry {made.seq}" if made else "head already signed")
        elif verb == "publish":
            self._publish()
        elif verb == "public-key":
            self.stdout.write(self._public_key(options["format"]))
        elif verb == "trusted-keys":
            self.stdout.write(json.dumps(checkpoints.key_list(*keys.trusted()), indent=2))
        elif verb == "rotate-key":
            self._rotate(options["output"])

    def _publish(self) -> None:
        """Witnesses take a copy of each checkpoint they lack (a copy they hold is never
        rewritten), but only of a trail that verifies whole without them: a witness added to
        a broken trail would vouch for the break."""
        unwitnessed = verify_trail(witnessed=False)
        if not unwitnessed.ok:
            self.stdout.write(json.dumps(unwitnessed.to_dict()))
            raise CommandError(f"nothing published: the audit trail is broken at seq "
                               f"{unwitnessed.first_broken_seq}")
        published = 0
        for checkpoint in AuditCheckpoint.objects.filter(
                algorithm=SignatureAlgorithm.ED25519).order_by("seq"):
            witnesses.publish(checkpoint.to_dict())
            published += 1
        report = verify_trail()
        self.stdout.write(json.dumps({**report.to_dict(), "published": published}))
        if not report.ok:
            raise CommandError(f"audit trail broken at seq {report.first_broken_seq}")

    def _archive(self, text: str, directory: Path) -> None:
        # An operator's `--before 2026-06-01` means that day's start; a time without a zone, UTC.
        if (day := parse_date(text)) is not None:
            text = f"{datetime.combine(day, time.min).isoformat()}Z"
        try:
            when = parse_timestamp(text, naive=UTC)
        except ValueError:
            raise CommandError(f"--before {text!r} is not a date or an ISO 8601 time") from None
        archive = archive_before(actor=f"system:manage.py ({_os_user()})", before=when,
                                 directory=directory)
        if archive is None:
            self.stdout.write(f"nothing to archive: no signed checkpoint past the boundary "
                              f"covers only entries before {text}")
            return
        self.stdout.write(f"archived entries {archive.first_seq}-{archive.last_seq} to "
                          f"{directory / archive.file_name} (sha256 {archive.sha256})")

    def _public_key(self, fmt: str) -> str:
        public = keys.signing_key().public_key()
        if fmt == "pem":
            return checkpoints.public_key_pem(public).rstrip("\n")
        form = checkpoints.published_key(public, "")
        if fmt == "base64":
            return form["public_key"]
        return json.dumps({"key_id": form["key_id"], "algorithm": form["algorithm"],
                           "public_key": form["public_key"]})

    def _rotate(self, output: str | None) -> None:
        target = Path(output) if output else keys.key_file()
        if target is None:
            raise CommandError("the key comes from AUDIT_PRIVATE_KEY: give --output PATH for "
                               "the new key, then point AUDIT_PRIVATE_KEY_FILE at it")
        if output and target.exists():
            raise CommandError(f"{target} exists: the new key is never written over a file")
        new_key = Ed25519PrivateKey.generate()
        entry = rotate_key(actor=f"system:manage.py ({_os_user()})", new_key=new_key)
        # Written only once the rotation is committed: a key no entry vouches for never signs.
        keys.write_key_file(target, new_key, replace=not output)
        self.stdout.write(f"rotated to key {entry.after['key_id']} (entry {entry.seq}); "
                          f"new private key in {target}")
