"""`manage.py audit archive`: old entries leave the live table for a file an auditor verifies
offline, and the live trail goes on verifying from the boundary, tampering in it still caught."""

import csv
import hashlib
import io
import json
import subprocess
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import DatabaseError, connection, transaction
from django.utils import timezone

import audit
from audit import actions, tree
from audit.choices import AuditAction
from audit.models import (
    AppendOnlyError,
    AuditArchive,
    AuditCheckpoint,
    AuditEntry,
    AuditPendingEntry,
)
from audit.verify import verify_trail
from tests.audit.attacker import DROP_BINDING

pytestmark = pytest.mark.django_db


def grant(people, n: int, agent: str = "") -> None:
    audit.record(actor=people.alice, action=AuditAction.TOKEN_ISSUED, target=f"token:{n}",
                 agent=agent)


@pytest.fixture
def old_then_new(people, refund_agent, settings, django_capture_on_commit_callbacks):
    """Twelve old entries (signed every 5), the cut-off DATE, then three newer ones."""
    settings.AUDIT_CHECKPOINT_EVERY = 5
    with django_capture_on_commit_callbacks(execute=True):
        for n in range(12):
            grant(people, n, agent="refund-agent" if n % 2 else "")
        cut = timezone.now()
        for n in range(12, 15):
            grant(people, n, agent="refund-agent")
    return cut


def archive(cut, directory: Path) -> AuditArchive | None:
    return actions.archive_before(actor="system:test", before=cut, directory=directory)


def live_seqs() -> list[int]:
    return list(AuditEntry.objects.order_by("seq").values_list("seq", flat=True))


def sql(statement: str, params: list | None = None) -> None:
    with connection.cursor() as cursor:
        cursor.execute(statement, params or [])


def as_attacker() -> None:
    """What a database superuser can do: switch the append-only triggers off (PostgreSQL)."""
    if connection.vendor == "postgresql":
        for table in ("audit_auditentry", "audit_auditcheckpoint", "audit_auditarchive",
                      "audit_audittreenode"):
            sql(f"ALTER TABLE {table} DISABLE TRIGGER USER")
        sql(DROP_BINDING)


def test_old_entries_go_to_a_file_and_the_live_trail_still_verifies(old_then_new, tmp_path,
                                                                    settings):
    settings.AUDIT_SEQUENCER = "workers"  # an entry not yet sequenced when the archive runs
    audit.record(actor="bob", action=AuditAction.TOKEN_ISSUED, target="token:pending")
    settings.AUDIT_SEQUENCER = "writers"
    head_before = AuditEntry.objects.order_by("-seq").first().seq

    made = archive(old_then_new, tmp_path)

    newer = AuditEntry.objects.get(target="token:12").seq  # the first entry after DATE
    signed_before = AuditCheckpoint.objects.filter(seq__lt=newer).order_by("-seq").first().seq
    assert made is not None and made.first_seq == 1
    assert made.last_seq == signed_before  # the newest checkpoint whose entries precede DATE
    seqs = live_seqs()
    assert seqs[0] == made.last_seq + 1 and seqs[-1] > head_before
    assert AuditEntry.objects.filter(target="token:12").exists()  # newer than DATE: stays
    # The queued entry was never archived: it is placed after the boundary (the archive's own
    # entry places what is queued before it), or still queued.
    placed = AuditEntry.objects.filter(target="token:pending").values_list("seq", flat=True)
    assert (AuditPendingEntry.objects.filter(target="token:pending").exists()
            or placed[0] > made.last_seq)
    announced = AuditEntry.objects.get(action=AuditAction.AUDIT_ARCHIVED)
    assert announced.after["first_seq"] == 1 and announced.after["last_seq"] == made.last_seq
    assert announced.after["file"] == made.file_name
    assert announced.after["sha256"] == made.sha256
    path = tmp_path / made.file_name
    assert hashlib.sha256(path.read_bytes()).hexdigest() == made.sha256
    assert not list(tmp_path.glob(".*.partial"))
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["entry"]["seq"] for r in lines if r["type"] == "entry"] == list(
        range(1, made.last_seq + 1))

    report = verify_trail(full_tree=True)
    assert report.ok, report.problem
    assert verify_trail().ok


def test_rerunning_with_the_same_date_does_nothing(old_then_new, tmp_path):
    first = archive(old_then_new, tmp_path)
    seqs = live_seqs()
    assert archive(old_then_new, tmp_path) is None
    assert live_seqs() == seqs
    assert AuditArchive.objects.count() == 1 and first is not None
    assert AuditEntry.objects.filter(action=AuditAction.AUDIT_ARCHIVED).count() == 1


def test_a_crash_after_the_file_is_written_leaves_what_the_next_run_finishes(
        old_then_new, tmp_path, monkeypatch):
    def crash(**kwargs):
        raise RuntimeError("power cut after the file was written")

    monkeypatch.setattr(actions, "record_archive", crash)
    with pytest.raises(RuntimeError):
        archive(old_then_new, tmp_path)
    (written,) = tmp_path.glob("audit-archive-*.jsonl")
    first_bytes = written.read_bytes()
    assert live_seqs()[0] == 1 and verify_trail().ok  # nothing left the database
    monkeypatch.undo()

    made = archive(old_then_new, tmp_path)
    assert made is not None and made.file_name == written.name
    assert written.read_bytes() == first_bytes  # the same file, written again
    assert live_seqs()[0] == made.last_seq + 1 and verify_trail().ok


def test_a_crash_before_the_rows_are_deleted_is_finished_by_the_next_run(
        old_then_new, tmp_path, monkeypatch):
    delete = actions.delete_archived
    calls = []

    def crash_on_the_deleting_call(*args, **kwargs):
        calls.append(1)
        if len(calls) > 1:  # the first call only tidies after an earlier run
            raise RuntimeError("killed before deleting")
        return delete(*args, **kwargs)

    monkeypatch.setattr(actions, "delete_archived", crash_on_the_deleting_call)
    with pytest.raises(RuntimeError):
        archive(old_then_new, tmp_path)
    assert AuditArchive.objects.count() == 1
    assert live_seqs()[0] == 1  # the rows are still here, behind the boundary
    assert verify_trail().ok
    monkeypatch.undo()

    assert archive(old_then_new, tmp_path) is None  # nothing new to archive, but it finishes
    boundary = AuditArchive.objects.get()
    assert live_seqs()[0] == boundary.last_seq + 1 and verify_trail().ok


def test_tampering_in_the_live_part_is_still_caught_at_its_seq(old_then_new, tmp_path):
    n = archive(old_then_new, tmp_path).last_seq
    as_attacker()
    sql("UPDATE audit_auditentry SET reason = 'nothing happened' WHERE seq = %s", [n + 3])
    report = verify_trail()
    assert (report.ok, report.first_broken_seq, report.reason) == (False, n + 3, "edited")


def test_a_row_missing_in_the_live_part_is_deleted(old_then_new, tmp_path):
    n = archive(old_then_new, tmp_path).last_seq
    as_attacker()
    sql("DELETE FROM audit_auditentry WHERE seq = %s", [n + 3])
    report = verify_trail()
    assert (report.ok, report.first_broken_seq, report.reason) == (False, n + 3, "deleted")


def test_rows_deleted_just_above_the_boundary_are_caught(old_then_new, tmp_path):
    n = archive(old_then_new, tmp_path).last_seq
    as_attacker()
    sql("DELETE FROM audit_auditentry WHERE seq IN (%s, %s)", [n + 1, n + 2])
    report = verify_trail()
    assert (report.ok, report.first_broken_seq, report.reason) == (False, n + 1, "deleted")


def test_moving_the_boundary_up_over_deleted_rows_is_caught(old_then_new, tmp_path):
    n = archive(old_then_new, tmp_path).last_seq
    as_attacker()
    moved = AuditEntry.objects.get(seq=n + 2)  # as if it were archived too
    sql("DELETE FROM audit_auditentry WHERE seq IN (%s, %s)", [n + 1, n + 2])
    sql("UPDATE audit_auditarchive SET last_seq = %s, last_hash = %s", [n + 2, moved.hash])
    report = verify_trail()
    assert (report.ok, report.first_broken_seq, report.reason) == (False, n + 1, "deleted")


def test_a_stored_tree_node_at_the_boundary_rewritten_is_caught(old_then_new, tmp_path):
    n = archive(old_then_new, tmp_path).last_seq
    as_attacker()
    level, index = tree.frontier_nodes(n)[0]  # the live tree grows from these nodes
    sql("UPDATE audit_audittreenode SET hash = %s WHERE position = %s",
        ["ab" * 32, tree.position(level, index)])
    report = verify_trail()
    assert not report.ok and report.reason == "rehashed"
    assert report.first_broken_seq <= n + 1


def test_removing_the_boundary_record_is_caught(old_then_new, tmp_path):
    archive(old_then_new, tmp_path)
    as_attacker()
    sql("DELETE FROM audit_auditarchive")
    report = verify_trail()
    assert (report.ok, report.first_broken_seq, report.reason) == (False, 1, "deleted")


def test_rows_past_the_boundary_are_still_refused(old_then_new, tmp_path):
    n = archive(old_then_new, tmp_path).last_seq
    with pytest.raises(AppendOnlyError):
        AuditEntry.objects.filter(seq=n + 1).delete()
    with pytest.raises(AppendOnlyError):
        AuditArchive.objects.all().delete()
    if connection.vendor == "postgresql":  # and the database's own trigger, under the model
        for statement in (f"DELETE FROM audit_auditentry WHERE seq = {n + 1}",
                          f"UPDATE audit_auditarchive SET last_seq = {n + 2}"):
            with pytest.raises(DatabaseError), transaction.atomic():
                sql(statement)
    assert verify_trail().ok


def test_the_operator_archives_and_verifies_from_the_command_line(old_then_new, tmp_path):
    call_command("audit", "archive", "--before", old_then_new.isoformat(), "--to",
                 str(tmp_path))
    assert live_seqs()[0] == AuditArchive.objects.get().last_seq + 1
    call_command("audit", "verify")
    call_command("audit", "archive", "--before", old_then_new.isoformat(), "--to",
                 str(tmp_path))  # a rerun: nothing more
    assert AuditArchive.objects.count() == 1


def test_the_api_verifies_and_evidence_inside_the_archive_is_refused_by_name(
        old_then_new, tmp_path, people, api_as):
    made = archive(old_then_new, tmp_path)
    dana = api_as(people.dana)
    assert dana.get("/api/v1/audit/verify").json()["ok"] is True
    refused = dana.get("/api/v1/agents/refund-agent/evidence")
    assert refused.status_code == 400
    assert made.file_name in json.dumps(refused.json())
    since = (old_then_new + timezone.timedelta(microseconds=1)).isoformat()
    live = dana.get("/api/v1/agents/refund-agent/evidence", {"from": since})
    assert live.status_code == 200, live.content
    newer = set(AuditEntry.objects.filter(target__in=["token:13", "token:14"])
                .values_list("seq", flat=True))
    assert len(newer) == 2 and {item["entry"]["seq"] for item in live.json()["entries"]} >= newer


# --- offline, as the auditor runs it ------------------------------------------------------------


@pytest.fixture
def agentctl(auditor_agentctl):
    def run(*args: str) -> tuple[int, str, str]:
        done = subprocess.run([str(auditor_agentctl), "audit", "verify", *map(str, args)],
                              capture_output=True, text=True, timeout=120)
        return done.returncode, done.stdout, done.stderr

    return run


@pytest.fixture
def public_key(people, api_as) -> str:
    published = api_as(people.dana).get("/api/v1/audit/keys").json()["keys"]
    (current,) = [key for key in published if key["retired_at"] is None]
    return current["public_key"]


def live_export(people, api_as, capture, tmp_path) -> Path:
    with capture(execute=True):
        response = api_as(people.dana).get("/api/v1/audit/export?format=jsonl")
    assert response.status_code == 200
    path = tmp_path / "live.jsonl"
    path.write_bytes(b"".join(response))
    return path


def test_the_archive_and_the_live_export_verify_offline_alone_and_as_one_trail(
        old_then_new, tmp_path, people, api_as, django_capture_on_commit_callbacks, agentctl,
        public_key):
    first = archive(old_then_new, tmp_path / "archive")
    with django_capture_on_commit_callbacks(execute=True):
        for n in range(15, 22):
            grant(people, n)
    second = archive(timezone.now(), tmp_path / "archive")
    assert second is not None and second.first_seq == first.last_seq + 1
    files = [tmp_path / "archive" / first.file_name, tmp_path / "archive" / second.file_name]
    live = live_export(people, api_as, django_capture_on_commit_callbacks, tmp_path)
    assert verify_trail().ok

    for path in [*files, live]:
        status, out, err = agentctl(path, "--public-key", public_key)
        assert status == 0, (path.name, err)
    status, out, err = agentctl(files[1], "--public-key", public_key)
    assert f"entries 1-{first.last_seq} archived" in out  # the second file starts at a boundary

    status, out, err = agentctl(*files, live, "--public-key", public_key)
    assert status == 0, err
    head = AuditEntry.objects.order_by("-seq").first()
    assert out.splitlines()[0] == f"OK {head.seq} entries, head {head.hash}"

    # Leaving the middle archive out is a gap an auditor sees.
    status, out, err = agentctl(files[0], live, "--public-key", public_key)
    assert status == 1 and f"FAILED at seq {first.last_seq + 1}: deleted" in err

    # A live export whose boundary was edited no longer continues the archive.
    records = [json.loads(line) for line in live.read_text().splitlines()]
    records[0]["boundary"]["hash"] = "0" * 64
    forged = tmp_path / "forged.jsonl"
    forged.write_text("".join(json.dumps(r) + "\n" for r in records))
    status, out, err = agentctl(*files, forged, "--public-key", public_key)
    assert status == 1 and f"FAILED at seq {second.last_seq + 1}: edited" in err

    # An archive file edited after the fact fails on its own.
    lines = files[0].read_text().splitlines()
    entry = next(i for i, line in enumerate(lines) if '"type":"entry"' in line)
    record = json.loads(lines[entry])
    record["entry"]["reason"] = "rewritten"
    lines[entry] = json.dumps(record)
    edited = tmp_path / "edited.jsonl"
    edited.write_text("\n".join(lines) + "\n")
    status, out, err = agentctl(edited, "--public-key", public_key)
    assert status == 1 and "FAILED at seq 1: edited" in err


def test_with_a_witness_the_archive_and_live_export_still_verify_as_one(
        settings, tmp_path, people, refund_agent, api_as, django_capture_on_commit_callbacks,
        agentctl):
    witness = tmp_path / "witness"
    settings.AUDIT_WITNESSES = [f"file://{witness}"]
    settings.AUDIT_CHECKPOINT_EVERY = 5
    with django_capture_on_commit_callbacks(execute=True):
        for n in range(12):
            grant(people, n)
        cut = timezone.now()
        for n in range(12, 15):
            grant(people, n, agent="refund-agent")
        made = archive(cut, tmp_path / "archive")
    key = api_as(people.dana).get("/api/v1/audit/keys").json()["keys"][0]["public_key"]
    live = live_export(people, api_as, django_capture_on_commit_callbacks, tmp_path)
    assert verify_trail().ok  # the witness copies of archived checkpoints still match

    status, out, err = agentctl(tmp_path / "archive" / made.file_name, live,
                                "--public-key", key, "--witness", witness)
    assert status == 0, err

    # The operator's own export (manage.py) carries the same boundary.
    mine = tmp_path / "mine.jsonl"
    with django_capture_on_commit_callbacks(execute=True):
        call_command("audit", "export", "-o", str(mine))
    assert json.loads(mine.read_text().splitlines()[0])["boundary"]["size"] == made.last_seq
    status, out, err = agentctl(tmp_path / "archive" / made.file_name, mine, "--public-key", key)
    assert status == 0, err

    # Evidence for the live part verifies offline as before.
    since = (cut + timezone.timedelta(microseconds=1)).isoformat()
    with django_capture_on_commit_callbacks(execute=True):
        response = api_as(people.dana).get("/api/v1/agents/refund-agent/evidence",
                                           {"from": since})
    assert response.status_code == 200, response.content
    bundle = tmp_path / "evidence.json"
    bundle.write_bytes(response.content)
    status, out, err = agentctl(bundle, "--public-key", key, "--witness", witness)
    assert status == 0, err


def test_a_csv_export_after_an_archive_verifies_joined_to_the_archive(
        old_then_new, tmp_path, people, api_as, django_capture_on_commit_callbacks, agentctl,
        public_key):
    made = archive(old_then_new, tmp_path / "archive")
    archived = tmp_path / "archive" / made.file_name
    with django_capture_on_commit_callbacks(execute=True):
        response = api_as(people.dana).get("/api/v1/audit/export?format=csv")
    assert response.status_code == 200
    body = b"".join(response).decode("utf-8")
    spreadsheet = tmp_path / "live.csv"
    spreadsheet.write_text(body, encoding="utf-8", newline="")
    head = AuditEntry.objects.order_by("-seq").first()
    assert body.splitlines()[1].startswith(f"{made.last_seq + 1},")  # the live part only

    # Alone, the CSV names what it lacks instead of a bare broken chain.
    status, out, err = agentctl(spreadsheet, "--chain-only")
    assert status == 1
    assert err.startswith(f"FAILED at seq 1: deleted: the file starts at entry "
                          f"{made.last_seq + 1}: entries 1-{made.last_seq} are not in it"), err

    # A CSV carries no signature: given a key, its rows past the archive are not proven.
    status, out, err = agentctl(archived, spreadsheet, "--public-key", public_key)
    assert (status, out) == (1, "")
    assert err.startswith(f"FAILED at seq {made.last_seq + 1}: unsigned: live.csv: a CSV "
                          f"carries no signed checkpoint"), err
    # After the archive it continues the archive's chain: the whole trail, to the live head,
    # said to be the chain alone past the archive (exit 3, never "OK").
    status, out, err = agentctl(archived, spreadsheet, "--public-key", public_key,
                                "--head", head.hash, "--chain-only")
    assert status == 3, err
    lines = out.splitlines()
    assert lines[0] == (f"CHAIN ONLY {head.seq} entries, head {head.hash}: chain only, "
                        "nothing proven by a signature")
    assert (f"live.csv: entries {made.last_seq + 1}-{head.seq} continue the chain "
            "(a CSV carries no checkpoints: its rows are not signed)") in lines

    # A row edited in the spreadsheet, or its first row gone, no longer continues it.
    rows = body.splitlines(keepends=True)
    edited = tmp_path / "edited.csv"
    edited.write_text(rows[0] + rows[1].replace("token:", "token:9", 1) + "".join(rows[2:]),
                      encoding="utf-8", newline="")
    status, out, err = agentctl(archived, edited, "--public-key", public_key, "--chain-only")
    assert status == 1
    assert err.startswith(f"FAILED at seq {made.last_seq + 1}: edited: edited.csv: "), err
    cut = tmp_path / "cut.csv"
    cut.write_text(rows[0] + "".join(rows[2:]), encoding="utf-8", newline="")
    status, out, err = agentctl(archived, cut, "--public-key", public_key, "--chain-only")
    assert status == 1
    assert err.startswith(f"FAILED at seq {made.last_seq + 1}: deleted: cut.csv: the file "
                          f"starts at entry {made.last_seq + 2}"), err


def test_with_a_witness_bare_entries_after_an_archive_are_proven_or_unsigned(
        settings, tmp_path, people, refund_agent, api_as, django_capture_on_commit_callbacks,
        agentctl):
    """A CSV (or entries-only JSONL) of the live trail handed over after part of it was
    archived: joined to the archive, the witness's checkpoints prove its rows; rows no
    witnessed checkpoint reaches, or a rewritten row, are never OK."""
    from agentgov.entries import entry_hash

    witness = tmp_path / "witness"
    settings.AUDIT_WITNESSES = [f"file://{witness}"]
    settings.AUDIT_CHECKPOINT_EVERY = 5
    dana = api_as(people.dana)
    with django_capture_on_commit_callbacks(execute=True):
        for n in range(12):
            grant(people, n)
        cut = timezone.now()
        for n in range(12, 15):
            grant(people, n, agent="refund-agent")
        made = archive(cut, tmp_path / "archive")
        response = dana.get("/api/v1/audit/export?format=csv")
    assert response.status_code == 200
    key = dana.get("/api/v1/audit/keys").json()["keys"][0]["public_key"]
    archived = tmp_path / "archive" / made.file_name
    body = b"".join(response).decode("utf-8")
    spreadsheet = tmp_path / "live.csv"
    spreadsheet.write_text(body, encoding="utf-8", newline="")
    entries = [{**row, "seq": int(row["seq"]), "before": json.loads(row["before"]),
                "after": json.loads(row["after"])}
               for row in csv.DictReader(io.StringIO(body))]
    lines = tmp_path / "live-entries.jsonl"
    lines.write_text("".join(json.dumps(e) + "\n" for e in entries), encoding="utf-8")
    head = AuditEntry.objects.order_by("-seq").first()
    assert entries[0]["seq"] == made.last_seq + 1 and entries[-1]["seq"] == head.seq

    for given in (spreadsheet, lines):
        status, out, err = agentctl(archived, given, "--public-key", key, "--witness", witness)
        assert status == 0, err
        said = out.splitlines()
        assert said[0] == f"OK {head.seq} entries, head {head.hash}"
        assert any(line.startswith(f"{given.name}: entries {made.last_seq + 1}-{head.seq} "
                                   f"proven by witnessed checkpoint {head.seq} ")
                   for line in said), out
        # Alone, the file names what it lacks.
        status, out, err = agentctl(given, "--public-key", key, "--witness", witness)
        assert (status, out) == (1, "")
        assert err.startswith(f"FAILED at seq 1: deleted: the file starts at entry "
                              f"{made.last_seq + 1}: entries 1-{made.last_seq} are not in it"), err

    # A row rewritten and the chain re-hashed: the witness's roots disagree.
    forged = [json.loads(json.dumps(e)) for e in entries]
    forged[0]["actor"] = "mallory"
    previous = made.last_hash
    for entry in forged:
        entry["prev_hash"], entry["hash"] = previous, None
        entry["hash"] = previous = entry_hash(entry)
    lines.write_text("".join(json.dumps(e) + "\n" for e in forged), encoding="utf-8")
    status, out, err = agentctl(archived, lines, "--public-key", key, "--witness", witness)
    assert (status, out) == (1, "")
    assert err.startswith(f"FAILED at seq {made.last_seq + 1}: witness-mismatch: "
                          f"live-entries.jsonl: entries up to "), err

    # A row past the last witnessed checkpoint: unsigned, not OK.
    extra = {**entries[-1], "seq": head.seq + 1, "prev_hash": head.hash, "target": "token:x"}
    extra["hash"] = entry_hash(extra)
    lines.write_text("".join(json.dumps(e) + "\n" for e in [*entries, extra]), encoding="utf-8")
    status, out, err = agentctl(archived, lines, "--public-key", key, "--witness", witness)
    assert (status, out) == (1, "")
    assert err.startswith(f"FAILED at seq {head.seq + 1}: unsigned: live-entries.jsonl: entries "
                          f"{head.seq + 1}-{head.seq + 1} are not proven"), err
