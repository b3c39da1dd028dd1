"""Reading and correcting an agent's grants at a permission source, each change audited.

A source that cannot be read keeps its last known reading, marked unknown, and the pass fails
(nothing is corrected on a guess); a reading that changed, and every correction made or refused
at the source, is an audit row naming the source, the role and the grants it saw."""

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from django.db import transaction
from django.utils import timezone

import audit
from audit.choices import AuditAction
from config.permission_sources import Source
from reconciliation.actions.common import desired_now
from reconciliation.actions.escalations import open_escalation
from reconciliation.choices import EscalationStatus
from reconciliation.connectors.base import ConnectorError, CorrectionRefused
from reconciliation.models import Escalation
from registry.connector_secrets import secret_value
from registry.models import Agent
from sources import aws_iam, oauth, postgres
from sources.choices import ReadingStatus
from sources.models import SourceReading
from sources.postgres import CREDENTIALS_REMEDY, SourceRefused

ACTOR = "system:permission-source"


@contextmanager
def _connection(source: Source) -> Iterator[psycopg.Connection]:
    dsn = secret_value(source.secret)
    if not dsn:
        raise SourceRefused(f"permission source {source.name} has no credentials",
                            detail=f"connector secret {source.secret} is not set")
    conn = postgres.connect(dsn, source.name)
    try:
        yield conn
    finally:
        conn.close()


@transaction.atomic
def _unknown(source: Source, agent: Agent, role: str, error: ConnectorError) -> None:
    reading, _ = SourceReading.objects.select_for_update(no_key=True).get_or_create(
        agent=agent, source=source.name, defaults={"role": role})
    was = reading.status
    reading.status, reading.checked_at = ReadingStatus.UNKNOWN, timezone.now()
    reading.error = str(error)
    reading.save(update_fields=["status", "checked_at", "error"])
    if was != ReadingStatus.UNKNOWN or reading.read_at is None:
        audit.record(actor=ACTOR, action=AuditAction.SOURCE_UNKNOWN,
                     target=f"source:{source.name}", agent=agent.name,
                     before={"status": was}, after=reading.to_dict(),
                     reason=f"{error}: the last known grants are kept, nothing is corrected")


@transaction.atomic
def _known(source: Source, agent: Agent, found: postgres.Reading) -> SourceReading:
    now = timezone.now()
    reading, created = SourceReading.objects.select_for_update(no_key=True).get_or_create(
        agent=agent, source=source.name, defaults={"role": found.role})
    before = None if created else reading.to_dict()
    changed = created or reading.status != ReadingStatus.KNOWN or (
        reading.access, reading.tools, reading.grants, reading.role) != (
        found.access, found.tools, found.grants, found.role)
    reading.role, reading.access, reading.grants = found.role, found.access, found.grants
    reading.tools = found.tools
    reading.status, reading.read_at, reading.checked_at, reading.error = (
        ReadingStatus.KNOWN, now, now, "")
    reading.save()
    if changed:
        audit.record(actor=ACTOR, action=AuditAction.SOURCE_KNOWN,
                     target=f"source:{source.name}", agent=agent.name, before=before,
                     after=reading.to_dict(), reason=f"read role {found.role} at {source.name}")
    return reading


def read_source(source: Source, agent: Agent) -> SourceReading:
    """What `agent`'s role can do at `source` now, stored; ConnectorError (the last known
    reading kept, marked unknown) when the source cannot be read."""
    role = source.role_of(agent.name) or ""
    try:
        if source.type == "oauth":
            found = oauth.read(source, agent.name)
        elif source.type == "aws_iam":
            found = aws_iam.read(source, agent.name)
        else:
            with _connection(source) as conn:
                found = postgres.read(conn, source, role)
    except psycopg.errors.InsufficientPrivilege as error:  # e.g. a catalog closed to it
        failure = SourceRefused(f"permission source {source.name} refused the control "
                                f"plane's credentials: {error.diag.message_primary}")
        _unknown(source, agent, role, failure)
        _escalate_once(agent, f"{failure}: {failure.remedy}")
        raise failure from None
    except psycopg.Error as error:
        failure = ConnectorError(f"permission source {source.name} could not be read",
                                 detail=str(error))
        _unknown(source, agent, role, failure)
        raise failure from None
    except ConnectorError as error:
        _unknown(source, agent, role, error)
        if isinstance(error, SourceRefused | CorrectionRefused):
            remedy = getattr(error, "remedy", CREDENTIALS_REMEDY)
            _escalate_once(agent, f"{error}: {remedy}")
        raise
    return _known(source, agent, found)


@transaction.atomic
def _escalate_once(agent: Agent, reason: str) -> None:
    """A human is asked once (while open) to fix credentials the source refuses."""
    if not Escalation.objects.filter(agent=agent, finding=None, reason=reason,
                                     status=EscalationStatus.OPEN).exists():
        open_escalation(agent, None, reason=reason)


def _approved(agent: Agent, source: Source) -> tuple[dict[str, str | None], dict[str, bool]]:
    """The access `agent` may have now on each resource `source` covers (None: none), and
    whether it may have each tool the source covers."""
    desired = desired_now(agent, timezone.now())
    data = {entry.get("resource"): entry.get("access") for entry in desired.get("data", [])}
    tools = set(desired.get("tools") or [])
    return ({resource: data.get(resource) for resource in source.covers},
            {tool: tool in tools for tool in source.covers_tools})


def correct_at_source(source: Source, agent: Agent, resource: str, wanted: str | None,
                      *, key: str) -> dict[str, Any]:
    """Bring `agent`'s role to `wanted` on `resource` at the source (one transaction there);
    the statements and both readings are audited here, made or refused."""
    role = source.role_of(agent.name) or ""
    try:
        if source.type == "oauth":
            statements, before, after = oauth.correct(source, agent.name, resource, wanted)
        elif source.type == "aws_iam":
            statements, before, after = aws_iam.correct(source, agent.name, resource, wanted,
                                                        *_approved(agent, source))
        else:
            with _connection(source) as conn:
                statements, before, after = postgres.correct(
                    conn, source, agent.name, resource, wanted, _approved(agent, source)[0])
    except CorrectionRefused as refused:
        audit.record(actor=ACTOR, action=AuditAction.SOURCE_CORRECTION_REFUSED,
                     target=f"source:{source.name}", agent=agent.name,
                     after={"role": role, "resource": resource, "wanted": wanted,
                            "idempotency_key": key}, reason=str(refused))
        raise
    except psycopg.Error as error:
        raise ConnectorError(f"permission source {source.name} could not be corrected",
                             detail=str(error)) from None
    outcome = {"source": source.name, "role": role, "resource": resource, "wanted": wanted,
               "statements": statements, "before": before.access.get(resource),
               "after": after.access.get(resource), "idempotency_key": key,
               "revoked": [g for g in before.grants if g.get("resource") == resource
                           and g not in after.grants]}
    if statements:
        audit.record(actor=ACTOR, action=AuditAction.SOURCE_CORRECTED,
                     target=f"source:{source.name}", agent=agent.name, after=outcome,
                     reason=f"role {role} brought to {wanted or 'no access'} on {resource}")
        _known(source, agent, after)
    return outcome


def correct_tool_at_source(source: Source, agent: Agent, tool: str, wanted: bool,
                           *, key: str) -> dict[str, Any]:
    """Take `tool` from `agent`'s role at the source (never given by a correction: wanted and
    not allowed there is refused); what was run and both readings are audited, made or
    refused."""
    role = source.role_of(agent.name) or ""
    try:
        statements, before, after = aws_iam.correct_tool(source, agent.name, tool, wanted,
                                                         *_approved(agent, source))
    except CorrectionRefused as refused:
        audit.record(actor=ACTOR, action=AuditAction.SOURCE_CORRECTION_REFUSED,
                     target=f"source:{source.name}", agent=agent.name,
                     after={"role": role, "tool": tool, "wanted": wanted,
                            "idempotency_key": key}, reason=str(refused))
        raise
    outcome = {"source": source.name, "role": role, "tool": tool, "wanted": wanted,
               "statements": statements, "before": before.tools.get(tool),
               "after": after.tools.get(tool), "idempotency_key": key,
               "revoked": [g for g in before.grants if g.get("tool") == tool
                           and g not in after.grants]}
    if statements:
        audit.record(actor=ACTOR, action=AuditAction.SOURCE_CORRECTED,
                     target=f"source:{source.name}", agent=agent.name, after=outcome,
                     reason=f"role {role} no longer allowed tool {tool}")
        _known(source, agent, after)
    return outcome
