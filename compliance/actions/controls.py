"""Compliance staff's own controls and mappings: a control added to a framework (the shipped
ones or a framework of their own), a shipped control's evidence queries changed, or a control
retired. Each change is a new version (versions are never edited) with its audit row."""

from typing import Any

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

import audit
from audit.choices import AuditAction
from compliance.choices import EvidenceQuery
from compliance.framework_report import frameworks
from compliance.frameworks import CONTROL_ID, MAX_TITLE, SLUG
from compliance.models import FrameworkControl
from config.errors import Invalid, NotAllowed, NotFound
from registry.choices import Role
from registry.roles import has_role

MAX_REASON = 1000


def _invalid(message: str, pointer: str, expected: str) -> Invalid:
    return Invalid(message, details=[{"pointer": pointer, "message": expected}])


def _check(actor: Any, framework: Any, control_id: Any, reason: Any) -> str:
    if not getattr(actor, "pk", None) or not has_role(actor, Role.COMPLIANCE):
        raise NotAllowed("Only compliance staff or an admin change the control library.")
    if not isinstance(framework, str) or not SLUG.match(framework):
        raise _invalid("A framework id is a lowercase slug.", "/framework",
                       "lowercase letters, digits and '-', at most 63 characters")
    if not isinstance(control_id, str) or not CONTROL_ID.match(control_id):
        raise _invalid("A control id is short and plain.", "/control_id",
                       "letters, digits, '.', '-' and '_', at most 40 characters")
    if not isinstance(reason, str) or not reason.strip() or len(reason) > MAX_REASON:
        raise _invalid("Say why: a control change is audited with its reason.", "/reason",
                       f"required, at most {MAX_REASON} characters")
    return reason.strip()


def _queries(queries: Any) -> list[str]:
    if (not isinstance(queries, list) or not queries or len(queries) > len(EvidenceQuery.values)
            or any(not isinstance(q, str) or q not in EvidenceQuery.values for q in queries)):
        raise _invalid("Name the evidence queries that show the control.", "/queries",
                       f"a list of one or more of {', '.join(EvidenceQuery.values)}")
    return list(dict.fromkeys(queries))


def _next_version(framework: str, control_id: str) -> tuple[int, FrameworkControl | None]:
    rows = FrameworkControl.objects.select_for_update(no_key=True).filter(framework=framework,
                                                               control_id=control_id)
    newest = rows.order_by("-version").first()
    latest = rows.aggregate(n=Max("version"))["n"] or 0
    return latest + 1, newest


@transaction.atomic
def save_control(*, actor: Any, framework: Any, control_id: Any, title: Any, queries: Any,
                 reason: Any) -> FrameworkControl:
    """A new version of a control: added, or its title and evidence queries changed."""
    why = _check(actor, framework, control_id, reason)
    if not isinstance(title, str) or not title.strip() or len(title) > MAX_TITLE:
        raise _invalid("Give the control a short title.", "/title",
                       f"required, at most {MAX_TITLE} characters")
    chosen = _queries(queries)
    version, newest = _next_version(framework, control_id)
    row = FrameworkControl.objects.create(
        framework=framework, control_id=control_id, version=version, title=title.strip(),
        queries=chosen, reason=why, changed_by=actor, changed_at=timezone.now())
    audit.record(actor=actor, action=AuditAction.CONTROL_SAVED,
                 target=f"control:{framework}/{control_id}",
                 before={"version": newest.version, "title": newest.title,
                         "queries": newest.queries, "retired": newest.retired}
                 if newest else None,
                 after={"version": version, "title": row.title, "queries": chosen}, reason=why)
    return row


@transaction.atomic
def retire_control(*, actor: Any, framework: Any, control_id: Any,
                   reason: Any) -> FrameworkControl:
    """A new version that removes the control from its framework's reports."""
    why = _check(actor, framework, control_id, reason)
    known = frameworks().get(framework)
    if known is None or all(c.id != control_id for c in known.controls):
        raise NotFound(f"No control {control_id!r} in framework {framework!r}.")
    version, newest = _next_version(framework, control_id)
    row = FrameworkControl.objects.create(
        framework=framework, control_id=control_id, version=version, retired=True,
        reason=why, changed_by=actor, changed_at=timezone.now())
    audit.record(actor=actor, action=AuditAction.CONTROL_RETIRED,
                 target=f"control:{framework}/{control_id}",
                 before={"version": newest.version if newest else None},
                 after={"version": version, "retired": True}, reason=why)
    return row
