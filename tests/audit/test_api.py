"""The audit API and export, for compliance; the export checked with the offline verifier."""

import csv
import io
import json
import re
import warnings
from pathlib import Path

import pytest
from agentgov.audit import verify_file
from asgiref.sync import async_to_sync
from django.db import connection
from django.test import AsyncClient

import audit
from audit.choices import AuditAction
from registry import actions
from tests.audit.attacker import DROP_BINDING

pytestmark = pytest.mark.django_db


def streamed(response) -> str:
    return b"".join(response).decode("utf-8")


def test_export_jsonl_is_the_v1_form_ending_at_a_checkpoint_over_its_own_entry(people, api_as):
    audit.record(actor=people.alice, action=AuditAction.TOKEN_ISSUED, target="user:alice",
                 agent="refund-agent", before=None, after={"note": "ünïcødé ✓", "n": 1.5})
    dana = api_as(people.dana)
    response = dana.get("/api/v1/audit/export?format=jsonl")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/x-ndjson"
    lines = [json.loads(line) for line in streamed(response).splitlines()]
    header, records = lines[0], lines[1:]
    assert header["type"] == "header" and header["format"] == "agentgov-audit-export/v1"
    kinds = [r["type"] for r in records]
    assert kinds == sorted(kinds, key=["checkpoint", "key", "entry"].index)  # in that order
    entries = [r["entry"] for r in records if r["type"] == "entry"]
    checkpoints = [r for r in records if r["type"] == "checkpoint"]
    keys = {r["key_id"] for r in records if r["type"] == "key"}
    assert [e["seq"] for e in entries] == list(range(1, header["size"] + 1))
    # The export records itself first and is signed after, so it is part of what it proves.
    assert entries[-1]["action"] == "audit.exported" and entries[-1]["actor"] == "dana"
    assert checkpoints[-1]["size"] == header["size"] and checkpoints[-1]["key_id"] in keys
    assert any(e["after"] == {"note": "ünïcødé ✓", "n": 1.5} for e in entries)
    status = verify_file(write_export(lines), public_keys=[current_key(dana)])
    assert status.ok and status.count == header["size"]


def write_export(lines: list[dict]) -> Path:
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False, encoding="utf-8") as f:
        f.write("".join(json.dumps(line) + "\n" for line in lines))
    return Path(f.name)


def current_key(client) -> str:
    keys = client.get("/api/v1/audit/keys").json()["keys"]
    return next(k["public_key"] for k in keys if k["retired_at"] is None)


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
    from_jsonl = [record["entry"] for record in map(json.loads, jsonl.splitlines())
                  if record["type"] == "entry"]
    # The CSV export was audited after the JSONL one, so it holds one more entry.
    assert from_csv[: len(from_jsonl)] == from_jsonl
    assert from_csv[-1]["action"] == "audit.exported"


def test_export_streams_under_both_servers_without_buffering_the_trail(people, api_as):
    """Django holds the whole body in a list when an ASGI server is given a sync iterator, or
    a WSGI server an async one: each server gets its own kind, so the trail is streamed."""
    _, key = actions.issue_api_token(people.dana, actor="system:test")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # Django warns when it falls back to buffering
        wsgi = api_as(people.dana).get("/api/v1/audit/export?format=jsonl")
        assert wsgi.status_code == 200 and wsgi.streaming and not wsgi.is_async
        last = json.loads(streamed(wsgi).splitlines()[-1])
        assert last["type"] == "entry" and last["entry"]["action"] == "audit.exported"

        async def over_asgi() -> tuple[int, bool, str]:
            response = await AsyncClient().get("/api/v1/audit/export?format=csv",
                                               headers={"Authorization": f"Token {key}"})
            body = [chunk async for chunk in response.streaming_content]
            return response.status_code, response.is_async, b"".join(body).decode()

        status, is_async, body = async_to_sync(over_asgi)()
    assert status == 200 and is_async
    rows = list(csv.DictReader(io.StringIO(body)))
    assert rows[-1]["action"] == "audit.exported" and rows[0]["seq"] == "1"


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
            cursor.execute(DROP_BINDING)
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
    assert "/roles/approver" in page  # a role is named, not numbered
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
    lines = [json.loads(line)["entry"] for line in export.read_text(encoding="utf-8").splitlines()
             if json.loads(line)["type"] == "entry"]
    assert lines[-1]["action"] == "audit.exported"  # the export is itself in the trail
    assert lines[-1]["actor"].startswith("system:manage.py")
    key = io.StringIO()
    call_command("audit", "public-key", "--format", "base64", stdout=key)
    checked = verify_file(export, public_keys=[key.getvalue().strip()])
    assert checked.ok and checked.count == len(lines), checked
    out = io.StringIO()
    call_command("audit", "verify", stdout=out)
    report = json.loads(out.getvalue())
    assert report["ok"] is True and report["count"] == len(lines)
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ALTER TABLE audit_auditentry DISABLE TRIGGER USER")
            cursor.execute(DROP_BINDING)
    with connection.cursor() as cursor:
        cursor.execute("UPDATE audit_auditentry SET actor = 'mallory' WHERE seq = 2")
    with pytest.raises(CommandError, match="audit trail broken at seq 2"):
        call_command("audit", "verify", stdout=io.StringIO())
