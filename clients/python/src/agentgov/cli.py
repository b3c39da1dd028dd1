"""`agentctl`: the control plane from a shell, kubectl-style."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from agentgov import monitor
from agentgov.audit import (
    EXIT_FAILED,
    EXIT_USAGE,
    UsageMistake,
    trusted_keys,
    verify_file,
)
from agentgov.client import Client
from agentgov.errors import AgentGovError, ApiError, Forbidden
from agentgov.mcp_cli import add_mcp_commands

DEFAULT_URL = "http://127.0.0.1:8000"
MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
UNRESOLVED = ("open", "correcting", "regressed", "blocked", "escalated", "logged")


class UsageError(Exception):
    """A mistake on the command line (not the control plane's answer)."""


def manifest_files(target: str) -> list[Path]:
    """The file, or every manifest file under a directory, in name order."""
    path = Path(target)
    if path.is_dir():
        return sorted(p for p in path.rglob("*") if p.suffix in MANIFEST_SUFFIXES and p.is_file())
    if path.is_file():
        return [path]
    raise UsageError(f"{target}: no such file or directory")


def read_manifests(target: str) -> list[tuple[str, str]]:
    """(name, text) of each manifest file; `-` reads standard input."""
    if target == "-":
        return [("<stdin>", sys.stdin.read())]
    files = manifest_files(target)
    if not files:
        raise UsageError(f"{target}: no manifest files (.yaml, .yml, .json)")
    return [(str(p), p.read_text(encoding="utf-8")) for p in files]


def table(rows: list[list[Any]], out: TextIO) -> None:
    """Columns padded to their widest cell, like kubectl."""
    cells = [["" if v is None else str(v) for v in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
    for row in cells:
        out.write("   ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() + "\n")


def condition(agent: dict[str, Any], kind: str) -> str:
    found = next((c for c in agent.get("conditions") or [] if c.get("type") == kind), None)
    return found["status"] if found else "-"


def short(value: Any) -> str:
    return "absent" if value is None else json.dumps(value, ensure_ascii=False)


# --- commands ----------------------------------------------------------------------------------


def cmd_apply(client: Client, args: argparse.Namespace, out: TextIO) -> int:
    documents = read_manifests(args.filename)
    if len(documents) > 1:
        # Check file by file first so errors name the right file and line; then apply them
        # all in one request, all or nothing.
        for name, text in documents:
            try:
                client.apply_manifests(text, dry_run=True)
            except ApiError as error:
                error.message = f"{name}: {error.message}"
                raise
    text = "\n---\n".join(text for _, text in documents)
    answer = client.apply_manifests(text, dry_run=args.dry_run)
    suffix = " (dry run)" if answer["dry_run"] else ""
    for result in answer["results"]:
        proposal = f" as proposal {result['proposal']}" if (
            result.get("proposal") and result["action"] != "unchanged") else ""
        out.write(f"agent/{result['agent']} {result['action']}{proposal}{suffix}\n")
        for change in result.get("changes") or []:
            out.write(f"  {change['text']}\n")
        for verdict in result.get("guardrails") or []:
            if verdict.get("outcome") != "passed":
                out.write(f"  guardrail {verdict['guardrail']}: {verdict['outcome']}"
                          f" ({verdict.get('message', '')})\n")
        if result.get("held"):
            out.write(f"  held: needs {result['required_approvals']} approval(s)\n")
    return 0


def cmd_get_agents(client: Client, args: argparse.Namespace, out: TextIO) -> int:
    filters = {k: v for k, v in {"label": args.label, "owner": args.owner,
                                 "status": args.status, "q": args.query}.items() if v}
    agents = list(client.agents(**filters))
    if args.output == "json":
        json.dump(agents, out, indent=2, ensure_ascii=False)
        out.write("\n")
        return 0
    if not agents:
        out.write("No agents found.\n")
        return 0
    rows: list[list[Any]] = [["NAME", "OWNER", "LIFECYCLE", "GENERATION", "READY", "DRIFTED",
                              "PENDING"]]
    rows += [[a["name"], a["owner"], a["lifecycle"], a["generation"], condition(a, "Ready"),
              condition(a, "Drifted"), a.get("pending_proposals", 0)] for a in agents]
    table(rows, out)
    return 0


def _findings(client: Client, name: str) -> list[dict[str, Any]] | None:
    """The agent's findings, or None when this token may not read findings."""
    try:
        return list(client.findings(agent=name))
    except Forbidden:
        return None


def cmd_describe_agent(client: Client, args: argparse.Namespace, out: TextIO) -> int:
    agent = client.get_agent(args.name)
    findings = _findings(client, args.name)
    if args.output == "json":
        json.dump({**agent, "findings": findings}, out, indent=2, ensure_ascii=False)
        out.write("\n")
        return 0
    labels = ", ".join(f"{k}={v}" for k, v in sorted((agent.get("labels") or {}).items()))
    connector = (agent.get("connector") or {}).get("type", agent.get("connector"))
    for label, value in [
        ("Name", agent["name"]), ("Owner", agent["owner"]), ("Lifecycle", agent["lifecycle"]),
        ("Generation", f"{agent['generation']} (sha256 {agent.get('spec_sha256') or '-'})"),
        ("Labels", labels or "-"), ("Description", agent.get("description") or "-"),
        ("Framework", agent.get("framework") or "-"), ("Connector", connector or "-"),
        ("Shadow", "yes" if agent.get("shadow") else "no"),
        ("Pending proposals", agent.get("pending_proposals", 0)),
    ]:
        out.write(f"{label + ':':<19}{value}\n")
    out.write("Conditions:\n")
    conditions = agent.get("conditions") or []
    if conditions:
        table([["  TYPE", "STATUS", "REASON", "MESSAGE", "SINCE", "GENERATION"]]
              + [[f"  {c['type']}", c["status"], c["reason"], c.get("message", ""),
                  c.get("lastTransitionTime"), c.get("observedGeneration")]
                 for c in conditions], out)
    else:
        out.write("  (none yet: no reconcile pass has run)\n")
    out.write("Findings:\n")
    if findings is None:
        out.write("  (not shown: reading findings needs the approver or compliance role)\n")
    elif not findings:
        out.write("  (none)\n")
    else:
        table([["  ID", "STATUS", "SEVERITY", "KIND", "POINTER", "EXPECTED", "ACTUAL",
                "LAST SEEN"]]
              + [[f"  {f['id']}", f["status"], f["severity"], f["kind"], f["pointer"],
                  short(f.get("expected")), short(f.get("actual")), f.get("last_seen")]
                 for f in findings], out)
    return 0


def cmd_diff(client: Client, args: argparse.Namespace, out: TextIO) -> int:
    """Exit 0 without differences, 1 with some (as diff(1) and kubectl diff do)."""
    if args.filename:
        text = "\n---\n".join(text for _, text in read_manifests(args.filename))
        results = [r for r in client.apply_manifests(text, dry_run=True)["results"]
                   if r["agent"] == args.name]
        if not results:
            raise UsageError(f"{args.filename}: no manifest for agent {args.name}")
        changes = [c for r in results for c in r.get("diff") or []]
        out.write(f"agent/{args.name} {results[0]['action']} (dry run): {len(changes)} "
                  f"change(s) against the approved state\n")
        for result in results:
            for change in result.get("changes") or []:
                out.write(f"  {change['text']}\n")
        for change in changes:
            out.write(f"  {change['pointer']}: {short(change.get('before'))} -> "
                      f"{short(change.get('after'))}\n")
        return 1 if changes else 0
    agent = client.get_agent(args.name)
    drift = [f for f in client.findings(agent=args.name) if f["status"] in UNRESOLVED]
    out.write(f"agent/{args.name} generation {agent['generation']}: "
              f"{len(drift)} unresolved drift(s) between desired and actual state\n")
    for finding in drift:
        out.write(f"  {finding['pointer']}: expected {short(finding.get('expected'))}, actual "
                  f"{short(finding.get('actual'))} ({finding['severity']}, "
                  f"{finding['status']})\n")
    return 1 if drift else 0


def cmd_approve(client: Client, args: argparse.Namespace, out: TextIO) -> int:
    proposal = client.approve(args.id, comment=args.comment,
                              expected_generation=args.expected_generation, otp=args.otp)
    if proposal["state"] == "pending":
        out.write(f"proposal {proposal['id']} ({proposal['agent']}): approved, "
                  f"{len(proposal.get('approvals') or [])} of "
                  f"{proposal['required_approvals']} approval(s); still pending\n")
    else:
        out.write(f"proposal {proposal['id']} ({proposal['agent']}): {proposal['state']}, "
                  f"generation {proposal.get('generation')}\n")
    return 0


def cmd_token_list(client: Client, args: argparse.Namespace, out: TextIO) -> int:
    tokens = list(client.tokens())
    if not tokens:
        out.write("No tokens.\n")
        return 0
    rows: list[list[Any]] = [["ID", "PREFIX", "HOLDER", "AGENT", "STATUS", "LAST USED"]]
    rows += [[t["id"], t["prefix"], t["holder"], t["agent"] or "-", t["status"],
              t["last_used_at"] or "never"] for t in tokens]
    table(rows, out)
    return 0


def cmd_token_revoke(client: Client, args: argparse.Namespace, out: TextIO) -> int:
    token = client.revoke_token(args.id, reason=args.reason)
    out.write(f"token {token['prefix']} (holder {token['holder']}): {token['status']}\n")
    return 0


def cmd_audit_verify(client: Client | None, args: argparse.Namespace, out: TextIO) -> int:
    path = args.path or ([args.file] if args.file else [])
    if path:
        try:
            check = verify_file(path, args.format, public_keys=args.public_key or (),
                                witness=args.witness, chain_only=args.chain_only)
        except UsageMistake as error:
            sys.stderr.write(f"error: {error}\n")
            return EXIT_USAGE
        if not check.ok:
            sys.stderr.write(f"{check}\n")
            return check.exit_status
        out.write(check.report())
        if args.head and args.head != check.head:
            sys.stderr.write(f"HEAD MISMATCH: the file ends at {check.head}, "
                             f"expected {args.head}\n")
            return EXIT_FAILED
        return check.exit_status
    assert client is not None
    report = client.audit_verify()
    out.write(json.dumps(report) + "\n")
    return 0 if report.get("ok") else 1


def cmd_audit_monitor(client: Client, args: argparse.Namespace, out: TextIO) -> int:
    keys = trusted_keys(args.public_key)
    state = Path(args.state)
    while True:
        seen = monitor.observe(client, state, keys)
        if not seen.ok:
            sys.stderr.write(f"{seen.line}\n")
            return EXIT_FAILED
        out.write(f"{seen.line}\n")
        out.flush()
        if not args.interval:
            return 0
        time.sleep(args.interval)


def cmd_audit_keys(client: Client, args: argparse.Namespace, out: TextIO) -> int:
    published = client.audit_keys()
    if args.output == "json":
        out.write(json.dumps(published, indent=2) + "\n")
        return 0
    out.write(f"{'KEY_ID':<16}  {'PUBLIC_KEY':<44}  {'CREATED':<27}  RETIRED\n")
    for key in published:
        out.write(f"{key['key_id']:<16}  {key['public_key']:<44}  {key['created_at']:<27}  "
                  f"{key.get('retired_at') or '-'}\n")
    return 0


def cmd_audit_export(client: Client, args: argparse.Namespace, out: TextIO) -> int:
    if args.output == "-":
        for chunk in client.audit_export(args.format):
            out.write(chunk.decode("utf-8"))
        return 0
    with open(args.output, "wb") as file:
        for chunk in client.audit_export(args.format):
            file.write(chunk)
    return 0


POLICY_SUFFIXES = (".yaml", ".yml", ".json")
MAX_POLICY_FILES = 500


def policy_files(folder: str) -> dict[str, str]:
    """The YAML and JSON files under a policy folder, path relative to it -> text."""
    root = Path(folder)
    if not root.is_dir():
        raise UsageError(f"{folder}: not a directory")
    files = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        if path.suffix in POLICY_SUFFIXES:
            files[path.relative_to(root).as_posix()] = path.read_text(encoding="utf-8")
    if not files:
        raise UsageError(f"{folder}: no YAML or JSON files")
    if len(files) > MAX_POLICY_FILES:
        raise UsageError(f"{folder}: more than {MAX_POLICY_FILES} files")
    return files


def cmd_policy_test(client: Client, args: argparse.Namespace, out: TextIO) -> int:
    """The folder's PolicyTest cases, judged by the server's evaluator: 0 when every case
    holds, 1 when one fails, 2 when a document cannot be read (or the server asked)."""
    try:
        answer = client.policy_tests(policy_files(args.folder))
    except ApiError as error:
        if error.code != "invalid_policy":
            raise
        sys.stderr.write(f"error: {error.message}\n")
        return 2
    for result in answer["results"]:
        out.write(result["line"] + "\n")
    total = answer["passed"] + answer["failed"]
    if answer["failed"]:
        out.write(f"{answer['failed']} of {total} case(s) failed\n")
        return 1
    out.write(f"{total} case(s) passed\n")
    return 0


# --- wiring ------------------------------------------------------------------------------------


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="agentctl", description="Drive the agent governance control plane.",
        epilog="The URL and token default to AGENTGOV_URL and AGENTGOV_TOKEN.")
    top.add_argument("--url", default=os.environ.get("AGENTGOV_URL", DEFAULT_URL),
                     help=f"the control plane (default: $AGENTGOV_URL or {DEFAULT_URL})")
    top.add_argument("--token", default=os.environ.get("AGENTGOV_TOKEN"),
                     help="API token (default: $AGENTGOV_TOKEN); write --token=KEY when the "
                          "key starts with '-'")
    verbs = top.add_subparsers(dest="verb", required=True, metavar="COMMAND")

    apply = verbs.add_parser("apply", help="register agents / propose versions from manifests")
    apply.add_argument("-f", "--filename", required=True,
                       help="a manifest file, a directory of them, or - for stdin")
    apply.add_argument("--dry-run", action="store_true", help="validate and diff only")
    apply.set_defaults(run=cmd_apply)

    get = verbs.add_parser("get", help="list resources")
    get.add_argument("resource", choices=["agents"])
    get.add_argument("-l", "--label", help="key=value")
    get.add_argument("--owner")
    get.add_argument("--status", help="lifecycle: pending, active, suspended ...")
    get.add_argument("-q", "--query", help="free text in name or description")
    get.add_argument("-o", "--output", choices=["table", "json"], default="table")
    get.set_defaults(run=cmd_get_agents)

    describe = verbs.add_parser("describe", help="one resource in detail")
    describe.add_argument("resource", choices=["agent"])
    describe.add_argument("name")
    describe.add_argument("-o", "--output", choices=["text", "json"], default="text")
    describe.set_defaults(run=cmd_describe_agent)

    diff = verbs.add_parser(
        "diff", help="drift between desired and actual state (or, with -f, what applying a "
                     "manifest would change); exit 1 when there is a difference")
    diff.add_argument("name")
    diff.add_argument("-f", "--filename", help="compare this manifest with the approved state")
    diff.set_defaults(run=cmd_diff)

    approve = verbs.add_parser("approve", help="approve a proposal (never your own)")
    approve.add_argument("id", type=int)
    approve.add_argument("-m", "--comment", default="")
    approve.add_argument("--expected-generation", type=int,
                         help="refuse if the agent moved on from this generation")
    approve.add_argument("--otp", default="",
                         help="a current code from your authenticator, when step-up applies")
    approve.set_defaults(run=cmd_approve)

    token = verbs.add_parser("token", help="your API tokens and your agents'")
    token_verbs = token.add_subparsers(dest="token_verb", required=True, metavar="COMMAND")
    token_verbs.add_parser("list", help="tokens you may revoke").set_defaults(run=cmd_token_list)
    revoke = token_verbs.add_parser("revoke", help="revoke a token at once (by its ID)")
    revoke.add_argument("id", type=int)
    revoke.add_argument("-m", "--reason", default="", help="why, for the audit trail")
    revoke.set_defaults(run=cmd_token_revoke)

    audit = verbs.add_parser("audit", help="the audit trail")
    audit_verbs = audit.add_subparsers(dest="audit_verb", required=True, metavar="COMMAND")
    verify = audit_verbs.add_parser(
        "verify", help="verify an export or evidence bundle offline (FILE), or ask the server",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="With FILE, nothing is sent anywhere: a v1 export or an evidence bundle is "
                    "proven by checkpoints signed\nwith a key given by --public-key. A CSV or an "
                    "entries-only JSONL carries no signature: with\n--public-key and --witness "
                    "it is proven by the witness's signed checkpoints (entries they do\nnot "
                    "reach fail as unsigned); --chain-only checks its chain alone. Every "
                    "checkpoint the\nwitness holds is held against the file. Without FILE, the "
                    "server walks its own trail.",
        epilog="exit status and first line:\n"
               "  0  OK N entries, head H         every entry proven by a trusted signature\n"
               "  3  CHAIN ONLY N entries, ...    --chain-only: chain only, nothing proven by "
               "a signature\n"
               "  1  FAILED at seq N: REASON: ... (on stderr) the first thing wrong, or "
               "BROKEN at seq N\n"
               "  2  error: ...                   a usage mistake (e.g. a CSV with neither "
               "--public-key\n"
               "                                  nor --chain-only)\n"
               "reasons: edited, deleted, truncated, rehashed, unsigned, unknown-key, "
               "retired-key,\n"
               "         witness-mismatch, witness-missing")
    verify.add_argument("path", nargs="*", metavar="FILE",
                        help="an export (JSONL or CSV) or an evidence bundle; or archive files "
                             "(oldest first) and the live export, verified as one trail")
    verify.add_argument("--file", help=argparse.SUPPRESS)  # the older spelling of FILE
    verify.add_argument("--public-key", action="append", metavar="KEY",
                        help="a trusted Ed25519 public key: base64 of its raw 32 bytes or a PEM "
                             "file, or the operator's trusted key list (a .json file that also "
                             "bounds the tree sizes each key may sign); repeat for more")
    verify.add_argument("--witness", metavar="DIR",
                        help="a witness directory of checkpoint-<size>.json copies: every one "
                             "is held against the file")
    verify.add_argument("--chain-only", action="store_true",
                        help="check only the hash chain of a CSV or entries-only JSONL (exit 3: "
                             "nothing proven by a signature)")
    verify.add_argument("--format", choices=["jsonl", "csv"],
                        help="default: detected from the file")
    verify.add_argument("--head", help="also require the trail to end at this hash")
    verify.set_defaults(run=cmd_audit_verify)
    keys = audit_verbs.add_parser(
        "keys", help="the public keys that sign checkpoints (give them to --public-key)")
    keys.add_argument("-o", "--output", choices=["table", "json"], default="table")
    keys.set_defaults(run=cmd_audit_keys)
    follow = audit_verbs.add_parser(
        "monitor", help="check the live trail's newest signed head against the last one seen",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Fetch the server's newest signed tree head, check its signature, and prove "
                    "it consistent with the\nhead saved in --state by the last run (an RFC 6962 "
                    "consistency proof from the server);\nthen save it. The first run saves the "
                    "head it finds. Run it on a schedule (cron, a systemd\ntimer) or with "
                    "--interval.",
        epilog="exit status and first line:\n"
               "  0  OK ...      the new head extends the one seen (or is the first, or "
               "unchanged)\n"
               "  1  FORK ...    (on stderr) cut back, rewritten or forked; the saved head is "
               "kept\n"
               "     FAILED ...  (on stderr) the head is not signed by a trusted key\n"
               "     error: ...  the server could not be asked\n"
               "  2  error: ...  a usage mistake")
    follow.add_argument("--state", required=True, metavar="FILE",
                        help="the JSON file holding the last head seen (created on first run)")
    follow.add_argument("--public-key", action="append", required=True, metavar="KEY",
                        help="a trusted Ed25519 public key, PEM file or trusted key list "
                             "(.json); repeat for more")
    follow.add_argument("--interval", type=float, default=0, metavar="SECONDS",
                        help="keep watching, checking every SECONDS (default: check once)")
    follow.set_defaults(run=cmd_audit_monitor)
    export = audit_verbs.add_parser("export", help="download the whole trail")
    export.add_argument("--format", choices=["jsonl", "csv"], default="jsonl")
    export.add_argument("-o", "--output", default="-", help="file path, or - for stdout")
    export.set_defaults(run=cmd_audit_export)
    policy = verbs.add_parser("policy", help="policies kept as code")
    policy_verbs = policy.add_subparsers(dest="policy_verb", required=True, metavar="COMMAND")
    policy_test = policy_verbs.add_parser(
        "test", help="run a policy folder's PolicyTest cases on the server's evaluator",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Send the folder's YAML and JSON files to POST /api/v1/policy-tests, which "
                    "judges each case with\nthe evaluator a policy commit meets and changes "
                    "nothing; print one line per case.",
        epilog="exit status:\n  0  every case holds\n  1  a case failed (FAIL lines name it)"
               "\n  2  a document cannot be read, the server could not be asked, or a usage "
               "mistake")
    policy_test.add_argument("folder", help="the policy folder (guardrails, tests, examples)")
    policy_test.set_defaults(run=cmd_policy_test)
    add_mcp_commands(verbs)
    return top


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Run one command; the exit status is 0 on success, 1 on failure, 2 for a usage
    mistake (`diff`: 1 when there are differences, 2 on failure)."""
    out = out or sys.stdout
    args = parser().parse_args(argv)
    offline = args.run is cmd_audit_verify and bool(args.path or args.file)
    if not offline and not args.token:
        sys.stderr.write("agentctl: no token: pass --token or set AGENTGOV_TOKEN\n")
        return 2
    client = None if offline else Client(args.url, args.token)
    failed = 2 if args.run in (cmd_diff, cmd_policy_test) else 1
    try:
        return args.run(client, args, out)
    except ApiError as error:
        sys.stderr.write(f"error: {error.message} ({error.status} {error.code})\n")
        for detail in error.details:
            line = f" (line {detail.extra['line']})" if detail.extra.get("line") else ""
            sys.stderr.write(f"  {detail.pointer or '/'}{line}: {detail.message}\n")
        return failed
    except (AgentGovError, UsageError, OSError, ValueError, RuntimeError) as error:
        sys.stderr.write(f"error: {error}\n")
        return failed
    finally:
        if client is not None:
            client.close()


def run() -> None:
    """The console script's entry point."""
    sys.exit(main())
