"""Alerts and audit rows as sentences a person reads ("refund-agent gained write access to crm;
corrected and verified in 3.2 s"), one function for the alert feed, its toasts and the audit
explorer. Pure: imports nothing from Django, so the live feed's JSON carries the same words."""

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from audit.alert_kinds import AlertKind
from config import pointers
from config.times import parse_timestamp

GAINED = {"tool_added": "gained tool {0}", "mcp_server_added": "gained MCP server {0}",
          "tool_removed": "lost tool {0}", "mcp_server_removed": "lost MCP server {0}",
          "data_removed": "lost access to {0}", "running_while_suspended": "is running while "
          "suspended", "stopped_while_active": "stopped while it should be running"}
# Past-tense words for the actions whose name is not one.
VERBS = {"run": "ran", "preference_set": "set", "preference_deleted": "deleted",
         "key_rotated": "rotated the signing key of",
         "signing_refused": "refused to sign", "enrolment_started": "started enrolling"}


def plain_text(value: Any) -> str:
    """A value as a reader sees it: never `None`, never a dict's repr."""
    if value is None or value == "":
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, Mapping):
        return ", ".join(f"{k} {plain_text(v)}".strip() for k, v in value.items())
    if isinstance(value, list | tuple):
        return ", ".join(plain_text(v) for v in value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))  # 640, not 640.0
    if isinstance(value, datetime):
        return _timestamp(value.isoformat()) or str(value)
    if isinstance(value, str) and (moment := _timestamp(value)) is not None:
        return moment
    return str(value)


_TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})?")


def _timestamp(text: str) -> str | None:
    """An ISO timestamp as people read it: to the second, in UTC."""
    if not _TIMESTAMP.fullmatch(text):
        return None
    try:
        moment = parse_timestamp(text, naive=UTC)
    except ValueError:
        return None
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def _segments(pointer: str) -> list[str]:
    return pointers.tokens(pointer)


def _versus(actual: Any, expected: Any) -> str:
    shown, approved = plain_text(actual), plain_text(expected)
    if shown and approved:
        return f" ({shown}; approved {approved})"
    if approved:
        return f" (approved {approved})"
    return f" ({shown})" if shown else ""


def drift_phrase(kind: str, pointer: str, expected: Any = None, actual: Any = None) -> str:
    """What drifted, as a verb phrase after the agent's name."""
    parts = _segments(pointer) or [pointer]
    subject = parts[1] if len(parts) > 1 else parts[0]
    if kind in GAINED:
        return GAINED[kind].format(subject)
    if kind in ("data_widened", "data_added"):
        level = plain_text(actual)
        return f"gained {level} access to {subject}" if level else f"gained access to {subject}"
    if kind == "expired_grant_present":
        level = plain_text(actual) or "its"
        return f"still holds {level} access to {subject} from an expired grant"
    if kind == "data_narrowed":
        return f"has less access to {subject} than approved{_versus(actual, expected)}"
    if kind in ("model_mismatch", "version_mismatch"):
        what = "model" if kind == "model_mismatch" else "version"
        return f"runs {what} {plain_text(actual)} instead of {plain_text(expected)}"
    if kind.startswith(("action_limit_", "limit_")):
        where = " of ".join(reversed(parts[1:3])) if len(parts) > 2 else subject
        change = kind.rsplit("_", 1)[1]
        if change == "missing":
            return f"dropped its limit on {where}{_versus(None, expected)}"
        if change == "added":
            return f"added a limit on {where} that was not approved{_versus(actual, None)}"
        return f"{change} its limit on {where}{_versus(actual, expected)}"
    if kind == "action_added":
        return f"gained action {subject}"
    if kind.startswith(("mcp_tool_", "mcp_prompt_", "mcp_resource_")):
        tool = parts[3] if len(parts) > 3 else subject
        verb = {"added": "gained", "removed": "lost", "changed": "changed"}[kind.rsplit("_")[-1]]
        noun = kind.removeprefix("mcp_").rsplit("_", 1)[0].replace("_", " ")
        return f"{verb} MCP {noun} {tool} on {subject}"
    if kind == "mcp_server_moved":
        return f"moved MCP server {subject}{_versus(actual, expected)}"
    return f"drifted at {pointer}" if pointer else f"drifted ({kind})"


def _seconds(value: Any) -> str:
    return f"{float(value):.1f} s" if isinstance(value, int | float) else ""


# A decided proposal's state, as its alert says it.
PROPOSAL_OUTCOMES = {"approved": "approved", "rejected": "rejected", "withdrawn": "withdrawn",
                     "superseded": "superseded by another", "pending": "revised"}


def _alert_sentence(event: str, who: str, drift: str, record: Mapping[str, Any]) -> str | None:
    message = plain_text(record.get("message"))
    took = _seconds(record.get("seconds_to_verify"))
    resolution = plain_text(record.get("resolution"))
    until, scope = plain_text(record.get("until")), plain_text(record.get("scope"))
    sentences = {
        AlertKind.DRIFT_DETECTED: f"{who} {drift}" + (f": {message}" if message else "") + (
            f" ({record['severity']} severity)" if record.get("severity") else ""),
        AlertKind.DRIFT_REGRESSED: f"{who} {drift} again within the hold window",
        AlertKind.ROLLOUT_STARTED: f"Rolling out approved generation {record.get('generation')} to "
                           f"{who}: {plain_text(record.get('pointer')) or 'its spec'}",
        AlertKind.ROLLOUT_SYNCED: f"{who} runs approved generation {record.get('generation')}" + (
            f", applied and verified in {took}" if took else ""),
        AlertKind.DRIFT_CORRECTED: f"{who} {drift}; corrected" + (
            f" and verified in {took}" if took else "") + (f" ({message})" if message else ""),
        AlertKind.ESCALATION_OPENED: f"{who} {drift}; handed to an approver" + (
            f": {message}" if message and not drift.startswith("drifted (") else ""),
        AlertKind.ESCALATION_RESOLVED: f"Escalation about {who} resolved" + (
            f": {resolution}" if resolution else ""),
        AlertKind.ESCALATION_SNOOZED: f"Escalation about {who} snoozed until {until}",
        AlertKind.ESCALATION_WOKE: f"Escalation about {who} is back from snooze",
        AlertKind.DECISION_PENDING: f"{who} waits for a sign-off: {message}",
        AlertKind.AGENT_SUSPENDED: f"{who} suspended: {message}",
        AlertKind.AGENT_SILENT: f"{who} went silent: {message}",
        AlertKind.AGENT_HEARD_AGAIN: f"{who} is heard from again",
        AlertKind.BREAKER_TRIPPED: f"Breaker tripped for {scope or 'the cluster'}: {message}",
        AlertKind.RECERTIFICATION_DUE: f"{who} is due for review: {message}",
        AlertKind.RECERTIFICATION_OVERDUE: f"{who} is overdue for review: {message}",
        AlertKind.INBOX_SLA_BREACHED: f"{message[:1].upper()}{message[1:]}" if message else None,
        AlertKind.PROPOSAL_PENDING: f"A change to {who} waits for approval" + (
            f" ({record['risk']} risk)" if record.get("risk") else ""),
        AlertKind.PROPOSAL_REVIEW: f"The proposal for {who} has a new review comment",
        AlertKind.PROPOSAL_DECIDED: f"The proposal for {who} was "
                            f"{PROPOSAL_OUTCOMES.get(record.get('state'), 'decided')}",
    }
    return sentences.get(event)


def _more_findings(findings: Any) -> str:
    """An incident's line names the findings that joined its first one."""
    more = len(findings) - 1 if isinstance(findings, list) else 0
    if more < 1:
        return ""
    return f" — and {more} more finding{'s' if more != 1 else ''} from the same change " \
           f"({more + 1} in this incident)"


def _actor(actor: str) -> str:
    if not actor:
        return "Someone"
    if actor.startswith("system"):
        return "The control plane"
    return actor.removeprefix("agent:")


def _target(target: str) -> str:
    noun, _, key = (target or "").partition(":")
    return f"{noun.replace('_', ' ')} {key}".strip()


def sentence(record: Mapping[str, Any]) -> str:
    """One alert message or audit row (its `event` or `action`, agent, actor, target, reason
    and any finding fields: kind, pointer, expected, actual) as one sentence."""
    event = record.get("event") or record.get("action") or ""
    agent = plain_text(record.get("agent"))
    who = agent or "An agent"
    kind, pointer = record.get("kind"), record.get("pointer")
    drift = drift_phrase(kind, pointer or "", record.get("expected"), record.get("actual")) \
        if kind else "drifted"
    said = _alert_sentence(event, who, drift, record) if "action" not in record else None
    if said:
        return said + _more_findings(record.get("findings"))
    noun, _, verb = event.partition(".")
    verb = VERBS.get(verb, verb.replace("_", " "))
    reason = plain_text(record.get("reason"))
    tail = f": {reason}" if reason else ""
    if noun == "finding" and kind:
        return f"{who} {drift}; finding {verb}{tail}"
    actor = _actor(plain_text(record.get("actor")))
    target = _target(plain_text(record.get("target")))
    if noun in ("user", "stepup") and target in ("", f"user {record.get('actor')}"):
        return f"{actor} {verb}{tail}" if noun == "user" else f"{actor}: two-factor {verb}{tail}"
    if not target:
        return f"{actor} {verb} {noun.replace('_', ' ')}{tail}"
    on = f" of {agent}" if agent and agent not in target else ""
    return f"{actor} {verb} {target}{on}{tail}" if verb else f"{actor}: {event} {target}{tail}"


def entry_sentence(entry: Any) -> str:
    """An AuditEntry (or anything with its fields) as a sentence; a finding's row reads from
    its recorded kind, pointer, expected and actual, and says what each witness saw when the
    agent and the source of record disagreed."""
    recorded = entry.after if isinstance(entry.after, Mapping) else (
        entry.before if isinstance(entry.before, Mapping) else {})
    finding = {key: recorded.get(key) for key in ("kind", "pointer", "expected", "actual")
               if key in recorded} if str(entry.target).startswith("finding:") else {}
    said = sentence({**finding, "action": entry.action, "agent": entry.agent,
                     "actor": entry.actor, "target": entry.target, "reason": entry.reason})
    cause = recorded.get("cause") if finding else None
    witnesses = cause.get("witnesses") if isinstance(cause, Mapping) else None
    if isinstance(witnesses, Mapping) and witnesses.get("said"):  # two witnesses disagreed
        said += f" ({plain_text(witnesses['said'])})"
    return said
