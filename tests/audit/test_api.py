"""The audit API and export, for compliance, and the export verified offline as the README says."""

import csv
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

import audit
from audit.choices import AuditAction
from tests.conftest import ROOT

pytestmark = pytest.mark.django_db


def readme_verifier(tmp_path: Path) -> Path:
    text = (ROOT / "README.md").read_text()
    block = re.search(r"<!-- offline-verify:start -->\s*```python\n(.*?)```", text, re.S).group(1)
    script = tmp_path / "verify_export.py"
    script.write_text(block)
    return script


def streamed(response) -> str:
    return b"".join(response).decode("utf-8")


def test_export_jsonl_verifies_offline_with_the_readme_procedure(people, api_as, tmp_path):
    audit.record(actor=people.alice, action=AuditAction.TOKEN_ISSUED, target="user:alice",
                 agent="refund-agent", before=None, after={"note": "ünïcødé ✓", "n": 1.5})
    dana = api_as(people.dana)
    response = dana.get("/api/v1/audit/export?format=jsonl")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/x-ndjson"
    body = streamed(response)
    lines = [json.loads(line) for line in body.splitlines()]
    # The export records itself first, so it is part of what it exports.
    assert lines[-1]["action"] == "audit.exported" and lines[-1]["actor"] == "dana"
    export = tmp_path / "trail.jsonl"
    export.write_text(body, encoding="utf-8")
    script = readme_verifier(tmp_path)
    ok = subprocess.run([sys.executable, str(script), str(export)], capture_output=True, text=True)
    head = dana.get("/api/v1/audit/verify").json()["head_hash"]
    assert ok.returncode == 0 and ok.stdout.strip() == f"OK {len(lines)} entries, head {head}"

    tampered = lines[:]
    tampered[3] = {**tampered[3], "actor": "mallory"}
    export.write_text("".join(json.dumps(row) + "\n" for row in tampered), encoding="utf-8")
    bad = subprocess.run([sys.executable, str(script), str(export)], capture_output=True, text=True)
    assert bad.returncode == 1 and bad.stderr.strip() == "BROKEN at seq 4"


def test_export_csv_round_trips_to_the_same_entries(people, api_as):
    dana = api_as(people.dana)
    jsonl = streamed(dana.get("/api/v1/audit/export?format=jsonl"))
    response = dana.get("/api/v1/audit/export?format=csv")
    assert response["Content-Type"] == "text/csv"
    rows = list(csv.DictReader(io.StringIO(streamed(response))))
    from_csv = [
        {**row, "seq": int(row["seq"]), "before": json.loads(row["before"]),
         "after": json.loads(row["after"])}
        for row in rows
    ]
    from_jsonl = [json.loads(line) for line in jsonl.splitlines()]
    # The CSV export was audited after the JSONL one, so it holds one more entry.
    assert from_csv[: len(from_jsonl)] == from_jsonl
    assert from_csv[-1]["action"] == "audit.exported"


def test_export_rejects_unknown_formats_with_the_json_error(people, api_as):
    response = api_as(people.dana).get("/api/v1/audit/export?format=xml")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "malformed"
    assert response.json()["error"]["details"][0]["pointer"] == "/format"


def test_verify_reports_ok_and_then_the_first_broken_seq(people, api_as):
    client = api_as(people.dana)
    good = client.get("/api/v1/audit/verify").json()
    assert good["ok"] is True and good["first_broken_seq"] is None and good["count"] >= 10
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ALTER TABLE audit_auditentry DISABLE TRIGGER USER")
    with connection.cursor() as cursor:
        cursor.execute("UPDATE audit_auditentry SET reason = 'edited' WHERE seq = 2")
    bad = client.get("/api/v1/audit/verify").json()
    assert bad["ok"] is False and bad["first_broken_seq"] == 2


def test_list_filters_by_agent_actor_action_and_time(people, api_as):
    audit.record(actor="system:reconciler", action=AuditAction.ROLE_GRANTED, target="x",
                 agent="refund-agent")
    client = api_as(people.dana)
    by_agent = client.get("/api/v1/audit?agent=refund-agent").json()["results"]
    assert [e["actor"] for e in by_agent] == ["system:reconciler"]
    by_action = client.get("/api/v1/audit?action=role.granted&actor=system:test").json()["results"]
    assert {e["target"] for e in by_action} == {
        "user:alice", "user:bob", "user:carol", "user:dana", "user:admin"}
    newest_first = [e["seq"] for e in client.get("/api/v1/audit").json()["results"]]
    assert newest_first == sorted(newest_first, reverse=True)
    future = client.get("/api/v1/audit?since=2999-01-01T00:00:00Z").json()["results"]
    assert future == []
    bad = client.get("/api/v1/audit?since=yesterday")
    assert bad.status_code == 400 and bad.json()["error"]["details"][0]["pointer"] == "/since"


@pytest.mark.parametrize("who, status", [
    ("dana", 200), ("admin", 200), ("alice", 403), ("bob", 403), (None, 401),
])
@pytest.mark.parametrize("path", ["/api/v1/audit", "/api/v1/audit/verify",
                                  "/api/v1/audit/export?format=jsonl"])
def test_only_compliance_and_admin_read_the_trail(people, api_as, who, status, path):
    from rest_framework.test import APIClient

    client = api_as(getattr(people, who)) if who else APIClient()
    response = client.get(path)
    assert response.status_code == status
    if status != 200:
        expected = {401: "unauthenticated", 403: "forbidden"}[status]
        assert response.json()["error"]["code"] == expected


def test_audit_explorer_filters_and_shows_readable_diffs(people, client):
    audit.record(actor="bob", action=AuditAction.ROLE_REVOKED, target="user:carol",
                 agent="refund-agent", before={"roles": ["approver"]}, after={"roles": []})
    client.force_login(people.dana)
    page = client.get("/audit/?agent=refund-agent").content.decode()
    assert "user:carol" in page and "user:alice" not in page
    assert "/roles/0" in page and "approver" in page
    client.force_login(people.alice)
    assert client.get("/audit/").status_code == 403


def test_audit_explorer_query_count_does_not_grow_with_the_trail(people, client,
                                                                  django_assert_max_num_queries):
    client.force_login(people.dana)
    for i in range(120):
        audit.record(actor="bob", action=AuditAction.ROLE_GRANTED, target=f"t{i}")
    with django_assert_max_num_queries(8):
        first = client.get("/audit/")
    assert first.status_code == 200
    older = re.search(r'href="\?before=(\d+)"', first.content.decode())
    assert older is not None
    with django_assert_max_num_queries(8):
        assert client.get(f"/audit/?before={older.group(1)}").status_code == 200


def test_the_operator_commands_export_verify_and_name_the_broken_seq(people, tmp_path):
    from django.core.management import CommandError, call_command

    audit.record(actor=people.alice, action=AuditAction.TOKEN_ISSUED, target="user:alice")
    export = tmp_path / "trail.jsonl"
    call_command("audit", "export", "--format", "jsonl", "--output", str(export))
    lines = [json.loads(line) for line in export.read_text(encoding="utf-8").splitlines()]
    assert lines[-1]["action"] == "audit.exported"  # the export is itself in the trail
    assert lines[-1]["actor"].startswith("system:manage.py")
    ok = subprocess.run([sys.executable, str(readme_verifier(tmp_path)), str(export)],
                        capture_output=True, text=True)
    assert ok.returncode == 0 and ok.stdout.startswith(f"OK {len(lines)} entries")
    out = io.StringIO()
    call_command("audit", "verify", stdout=out)
    report = json.loads(out.getvalue())
    assert report["ok"] is True and report["count"] == len(lines)
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ALTER TABLE audit_auditentry DISABLE TRIGGER USER")
    with connection.cursor() as cursor:
        cursor.execute("UPDATE audit_auditentry SET actor = 'mallory' WHERE seq = 2")
    with pytest.raises(CommandError, match="audit trail broken at seq 2"):
        call_command("audit", "verify", stdout=io.StringIO())
