"""agentctl against a real server: apply -f, get agents, describe agent, diff, approve, and
audit verify --file doing exactly the auditor's guide's offline procedure (docs/audit-trail.md)."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from agentgov import Client
from agentgov.cli import main

from config.embedded_redis import free_port
from reconciliation import actions as reconciliation
from registry.models import Agent, DesiredStateVersion
from tests.conftest import REFUND_AGENT_YAML, ROOT

AGENTCTL = Path(sys.executable).parent / "agentctl"


@pytest.fixture
def ctl(server, capsys):
    """Run agentctl with a token; returns (exit status, stdout, stderr)."""

    def run(token: str | None, *argv: str) -> tuple[int, str, str]:
        status = main(["--url", server, *([f"--token={token}"] if token else []), *argv])
        out, err = capsys.readouterr()
        return status, out, err

    return run


def readme_auditor_commands() -> list[str]:
    text = (ROOT / "docs" / "audit-trail.md").read_text()
    block = re.search(r"<!-- auditor-commands:start -->\s*```sh\n(.*?)```", text, re.S).group(1)
    return [line.split("  #")[0].strip() for line in block.splitlines() if line.strip()]


@pytest.fixture
def server(live_server_process) -> str:
    """A daphne per test: it is started with the test's witness (`witness_dir`)."""
    return live_server_process.url


@pytest.fixture
def witness_dir(tmp_path, monkeypatch) -> Path:
    """A directory witness for the server process (list it before `server`)."""
    folder = tmp_path / "witness"
    monkeypatch.setenv("AUDIT_WITNESSES", f"file://{folder}")
    return folder


def test_an_owner_applies_an_approver_approves_and_everyone_reads(ctl, keys, tmp_path, people):
    manifest = tmp_path / "refund.yaml"
    manifest.write_text(REFUND_AGENT_YAML)
    status, out, _ = ctl(keys.alice, "apply", "-f", str(manifest))
    proposal = DesiredStateVersion.objects.get()
    assert status == 0
    assert out.splitlines()[0] == f"agent/refund-agent created as proposal {proposal.pk}"
    assert any("payments.refund" in line for line in out.splitlines()[1:])

    status, out, _ = ctl(keys.alice, "get", "agents")
    header, row = out.splitlines()
    assert header.split() == ["NAME", "OWNER", "LIFECYCLE", "GENERATION", "READY", "DRIFTED",
                              "PENDING"]
    assert row.split() == ["refund-agent", "alice", "active", "0", "-", "-", "1"]

    status, _, err = ctl(keys.alice, "approve", str(proposal.pk))
    assert status == 1 and "(403 forbidden)" in err  # four eyes: never her own agent
    status, out, _ = ctl(keys.bob, "approve", str(proposal.pk), "-m", "looks right")
    assert status == 0
    assert out == f"proposal {proposal.pk} (refund-agent): approved, generation 1\n"

    reconciliation.reconcile_agent(Agent.objects.get().pk, trigger="manual")
    status, out, _ = ctl(keys.dana, "describe", "agent", "refund-agent")
    assert status == 0
    assert re.search(r"^Generation:\s+1 \(sha256 [0-9a-f]{64}\)$", out, re.M)
    assert re.search(r"^  Ready\s+True\s+Converged\s+matches generation 1", out, re.M)
    assert out.rstrip().endswith("Findings:\n  (none)")
    status, out, _ = ctl(keys.alice, "describe", "agent", "refund-agent")
    assert "(not shown: reading findings needs the approver or compliance role)" in out

    status, out, _ = ctl(keys.alice, "get", "agents", "-l", "team=payments", "-o", "json")
    assert [a["name"] for a in json.loads(out)] == ["refund-agent"]
    status, out, _ = ctl(keys.alice, "get", "agents", "-l", "team=search")
    assert out == "No agents found.\n"


def test_a_directory_is_applied_all_or_nothing_and_errors_name_file_and_line(ctl, keys, tmp_path,
                                                                            people):
    (tmp_path / "a-refund.yaml").write_text(REFUND_AGENT_YAML)
    (tmp_path / "b-broken.yaml").write_text(
        REFUND_AGENT_YAML.replace("name: refund-agent", "name: other-agent")
        .replace("access: read}", "access: own}"))
    status, _, err = ctl(keys.alice, "apply", "-f", str(tmp_path))
    assert status == 1
    assert "b-broken.yaml" in err.splitlines()[0] and "(422 invalid)" in err
    assert re.search(r"^  /spec/data/0/access \(line \d+\): ", err, re.M)
    assert not Agent.objects.exists()

    (tmp_path / "b-broken.yaml").unlink()
    assert ctl(keys.alice, "apply", "-f", str(tmp_path), "--dry-run")[1].startswith(
        "agent/refund-agent created (dry run)")
    assert not Agent.objects.exists()


def test_diff_shows_drift_until_it_is_corrected(ctl, keys, server, agent_key, push_agent,
                                                tmp_path):
    assert ctl(keys.dana, "diff", "refund-agent")[:2] == (
        0, "agent/refund-agent generation 1: 0 unresolved drift(s) between desired and actual "
           "state\n")
    agent = Client(server, agent_key, agent="refund-agent")
    desired = agent.desired_state()
    agent.report_observed({**desired.as_observed(), "tools": ["crm.search", "orders.lookup",
                                                              "payments.refund"]})
    reconciliation.reconcile_agent(push_agent.pk, trigger="observation")
    status, out, _ = ctl(keys.dana, "diff", "refund-agent")
    assert status == 1 and "1 unresolved drift(s)" in out
    assert re.search(r'^  /tools.*: expected absent, actual "crm.search" \(\w+, correcting\)$',
                     out, re.M)

    agent.report_observed(desired.as_observed())
    reconciliation.reconcile_agent(push_agent.pk, trigger="observation")
    assert ctl(keys.dana, "diff", "refund-agent")[0] == 0
    agent.close()

    manifest = tmp_path / "refund.yaml"
    manifest.write_text(REFUND_AGENT_YAML.replace(
        "connector: {type: sandbox}", "connector: {type: push}").replace(
        "[orders.lookup, payments.refund]", "[orders.lookup, payments.refund, crm.search]"))
    status, out, _ = ctl(keys.alice, "diff", "refund-agent", "-f", str(manifest))
    assert status == 1 and out.startswith("agent/refund-agent proposed (dry run): ")
    assert "crm.search" in out
    assert not DesiredStateVersion.objects.filter(state="pending").exists()  # a dry run


def test_the_readme_auditor_commands_verify_an_export_from_their_own_venv(
        witness_dir, ctl, keys, server, tmp_path, refund_agent, auditor_agentctl):
    install, fetch_keys, verify = readme_auditor_commands()
    assert install == "pip install ./clients/python"  # what auditor_agentctl's venv ran
    trail = tmp_path / "trail.jsonl"
    assert ctl(keys.dana, "audit", "export", "-o", str(trail))[0] == 0
    env = {"PATH": f"{auditor_agentctl.parent}:/usr/bin:/bin", "AGENTGOV_URL": server,
           "TOKEN": keys.dana, "WITNESS_DIR": str(witness_dir), "HOME": str(tmp_path)}
    listed = subprocess.run(["bash", "-c", fetch_keys], capture_output=True, text=True, env=env,
                            cwd=tmp_path, timeout=60)
    assert listed.returncode == 0, listed.stderr
    header, *rows = listed.stdout.splitlines()
    assert header.split() == ["KEY_ID", "PUBLIC_KEY", "CREATED", "RETIRED"]
    (current,) = [row.split() for row in rows if row.split()[3] == "-"]
    env["PUBLIC_KEY"] = current[1]

    proven = subprocess.run(["bash", "-c", verify], capture_output=True, text=True, env=env,
                            cwd=tmp_path, timeout=60)
    assert proven.returncode == 0, proven.stderr
    entries = [json.loads(line) for line in trail.read_text(encoding="utf-8").splitlines()]
    size = entries[0]["size"]
    assert proven.stdout.splitlines()[0].startswith(f"OK {size} entries, head ")
    assert proven.stdout.splitlines()[-1].startswith(f"entries 1-{size} proven by checkpoint "
                                                     f"{size} (key {current[0]}")
    server_head = json.loads(ctl(keys.dana, "audit", "verify")[1])["head_hash"]
    assert ctl(None, "audit", "verify", str(trail), "--public-key", current[1],
               "--head", server_head)[0] == 0  # nothing was appended since the export

    records = [json.loads(line) for line in trail.read_text(encoding="utf-8").splitlines()]
    next(r for r in records if r["type"] == "entry")["entry"]["actor"] = "mallory"
    trail.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    tampered = subprocess.run(["bash", "-c", verify], capture_output=True, text=True, env=env,
                              cwd=tmp_path, timeout=60)
    assert tampered.returncode == 1 and tampered.stderr.startswith("FAILED at seq 1: edited: ")

    csv_trail = tmp_path / "export.csv"
    assert ctl(keys.dana, "audit", "export", "--format", "csv", "-o", str(csv_trail))[0] == 0
    # A CSV carries no checkpoint: the witness's signed copies prove it, or nothing does.
    status, out, err = ctl(None, "audit", "verify", "--file", str(csv_trail),
                           "--public-key", current[1], "--witness", str(witness_dir))
    assert status == 0 and out.startswith(f"OK {size + 1} entries, head "), err
    status, out, err = ctl(None, "audit", "verify", "--file", str(csv_trail),
                           "--public-key", current[1])
    assert (status, out) == (1, "") and err.startswith("FAILED at seq 1: unsigned: ")


def test_usage_mistakes_and_an_unreachable_server_are_reported_plainly(keys, capsys):
    assert main(["--url", "http://127.0.0.1:1", "get", "agents"]) == 2
    assert "no token" in capsys.readouterr().err
    url = f"http://127.0.0.1:{free_port()}"
    assert main(["--url", url, f"--token={keys.alice}", "get", "agents"]) == 1
    assert capsys.readouterr().err.startswith("error: GET ")
    assert main(["audit", "verify", "--file", "/no/such/export.jsonl"]) == 2  # usage
    assert capsys.readouterr().err.startswith("error: /no/such/export.jsonl")


def test_the_installed_console_script_works(server, keys):
    env = {**os.environ, "AGENTGOV_URL": server, "AGENTGOV_TOKEN": keys.alice}
    shown = subprocess.run([str(AGENTCTL), "--help"], capture_output=True, text=True)
    assert shown.returncode == 0 and "apply" in shown.stdout and "audit" in shown.stdout
    listed = subprocess.run([str(AGENTCTL), "get", "agents"], capture_output=True, text=True,
                            env=env, timeout=60)
    assert listed.returncode == 0 and listed.stdout == "No agents found.\n"


def test_an_owner_lists_and_revokes_their_agents_token_with_agentctl(ctl, keys, people,
                                                                      server):
    from registry import actions as registry_actions
    from tests.conftest import approved_agent

    agent = approved_agent(people, "refund-agent")
    token, key = registry_actions.issue_agent_token(agent, actor=people.admin)
    status, out, _ = ctl(keys.alice, "token", "list")
    assert status == 0
    (row,) = [line.split() for line in out.splitlines() if line.startswith(str(token.pk))]
    assert row[1:5] == [key[:8], "admin", "refund-agent", "active"]
    assert ctl(keys.bob, "token", "revoke", str(token.pk))[0] == 1  # not bob's: 404
    status, out, _ = ctl(keys.alice, "token", "revoke", str(token.pk), "-m", "not mine")
    assert status == 0 and out.strip().endswith("revoked")
    with Client(server, key, agent="refund-agent") as client, pytest.raises(Exception) as error:
        client.desired_state()
    assert getattr(error.value, "status", None) == 401


def test_an_approver_steps_up_with_a_code_from_the_command_line(ctl, keys, people):
    import time

    from django_otp.plugins.otp_totp.models import TOTPDevice

    from registry import actions
    from tests.conftest import approved_agent, refund_manifest
    from tests.registry.test_stepup import totp

    agent = approved_agent(people, "refund-agent")
    actions.create_guardrail(actor=people.dana, name="model-changes",
                             expression='spec.model == "gpt-4.1"', effect="step_up",
                             message="changing the model needs a second factor")
    proposal = actions.propose(agent, refund_manifest(model="gpt-5").spec,
                               agent.active_version.metadata, actor=people.alice,
                               source="api").version
    device = TOTPDevice.objects.create(user=people.bob, confirmed=True,
                                       last_t=int(time.time() // 30) - 2)
    status, _, err = ctl(keys.bob, "approve", str(proposal.pk))
    assert status == 1 and "step_up_required" in err
    status, out, _ = ctl(keys.bob, "approve", str(proposal.pk), "--otp", totp(device.bin_key))
    assert status == 0 and out.endswith("approved, generation 2\n")


def test_the_monitor_follows_the_live_trail_and_fails_on_a_rewrite(ctl, keys, server, tmp_path):
    from agentgov import checkpoints as signing
    from agentgov.entries import entry_leaf_hash
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from django.db import connection

    from audit import keys as audit_keys
    from audit import tree
    from audit.chain import format_time
    from audit.models import AuditCheckpoint
    from audit.verify import fetch_chunk
    from tests.audit.test_tamper import rewrite_from, sql

    state, public = tmp_path / "seen-head.json", tmp_path / "key.pem"
    real = audit_keys.signing_key()  # the server's key (DEBUG: the one under var/)
    public.write_text(signing.public_key_pem(real.public_key()))
    watch = ("audit", "monitor", "--state", str(state), "--public-key", str(public))

    assert ctl(keys.dana, "audit", "export", "-o", str(tmp_path / "a.jsonl"))[0] == 0
    first = AuditCheckpoint.objects.order_by("-seq").first()
    status, out, err = ctl(keys.dana, *watch)
    assert status == 0, err
    assert out.startswith(f"OK first head {first.seq} (root {first.root}) saved to {state}")
    assert ctl(keys.dana, *watch)[1].startswith(f"OK head {first.seq} unchanged")
    assert ctl(keys.dana, "audit", "export", "-o", str(tmp_path / "b.jsonl"))[0] == 0
    second = AuditCheckpoint.objects.order_by("-seq").first()
    status, out, err = ctl(keys.dana, *watch)
    assert status == 0 and out.startswith(f"OK head {second.seq} extends head {first.seq}"), err

    # An insider holding the database and the key rewrites entry 2, remakes the tree and signs
    # a new, larger head over the forgery with the real key.
    import audit
    from audit.choices import AuditAction

    audit.record(actor="mallory", action=AuditAction.ROLE_GRANTED, target="user:mallory")
    # The append-only guard is PostgreSQL's triggers (SQLite has none to switch). This test
    # commits (a live server reads what it writes): the triggers it switches off are switched
    # on again, or every later test would run without the guard.
    guarded = ("auditentry", "auditcheckpoint", "audittreenode")
    if connection.vendor != "postgresql":
        guarded = ()
    try:
        for table in guarded:
            sql(f"ALTER TABLE audit_{table} DISABLE TRIGGER USER")
        rewrite_from(2)
        rows = fetch_chunk(0, 100000)
        sql("DELETE FROM audit_audittreenode")
        tree.append_leaves(0, [entry_leaf_hash(row) for row in rows])
        size = len(rows)
        made = signing.sign_checkpoint(real, size, tree.root(size), format_time(second.at))
        sql("DELETE FROM audit_auditcheckpoint WHERE seq >= %s", [size])
        sql("INSERT INTO audit_auditcheckpoint (seq, head_hash, root, at, key_id, algorithm, "
            "signature) VALUES (%s, %s, %s, %s, %s, 'ed25519', %s)",
            [size, rows[-1]["hash"], made["root"], second.at, made["key_id"],
             made["signature"]])
    finally:
        for table in guarded:
            sql(f"ALTER TABLE audit_{table} ENABLE TRIGGER USER")
    assert size > second.seq
    status, out, err = ctl(keys.dana, *watch)
    assert (status, out) == (1, "")
    assert err.startswith(f"FORK head {size} is not consistent with head {second.seq} seen "
                          f"before"), err
    assert json.loads(state.read_text())["size"] == second.seq  # kept: every run fails on
    assert ctl(keys.dana, *watch)[0] == 1
    # A head signed by a key the monitor does not trust is refused before any proof.
    other = tmp_path / "other.pem"
    other.write_text(signing.public_key_pem(Ed25519PrivateKey.generate().public_key()))
    status, _, err = ctl(keys.dana, "audit", "monitor", "--state", str(state), "--public-key",
                         str(other))
    assert status == 1 and err.startswith(f"FAILED the newest head ({size}) is not signed by a "
                                          f"trusted key"), err


def test_verify_help_names_each_exit_status_and_its_first_line(capsys):
    with pytest.raises(SystemExit):
        main(["audit", "verify", "--help"])
    shown = capsys.readouterr().out
    for line in ("0  OK N entries, head H", "3  CHAIN ONLY N entries",
                 "chain only, nothing proven by a signature", "1  FAILED at seq N: REASON",
                 "2  error: ...", "unsigned", "retired-key", "--chain-only"):
        assert line in shown, line
    with pytest.raises(SystemExit):
        main(["audit", "monitor", "--help"])
    assert "1  FORK" in capsys.readouterr().out
