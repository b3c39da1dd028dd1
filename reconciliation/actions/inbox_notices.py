"""What the inbox tells whom: the sweep that notices new items (for each person who may decide
them or owns the agent to recertify, and each team about its agents) and SLA breaches (an
alert, an audit row, the next approver told), queued on the registry's notification
preferences and sent by its sending (registry/actions/notifications.py), each audited."""

from collections import defaultdict
from datetime import datetime
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.utils import timezone

import audit
from audit.alert_kinds import AlertKind
from audit.choices import AuditAction
from reconciliation import inbox
from reconciliation.alerts import broadcast
from registry.actions.notifications import BREACH, NEW, deliver, listening
from registry.choices import Role
from registry.models import Agent, Notification, NotificationPreference, SlaBreach
from registry.roles import has_role


def _line(item: inbox.Item, now: datetime, why: str) -> str:
    head = "SLA BREACHED: " if why == BREACH else ""
    return (f"{head}{item.kind} · {item.agent} · {item.what} · {item.severity} · "
            f"{inbox.time_left(item.seconds_left(now))} · {settings.SITE_URL}{item.link}")


def _queue(preference: NotificationPreference, item: inbox.Item, why: str,
           now: datetime) -> bool:
    """Record that `preference` is to hear about `item` (once); True when new."""
    try:
        with transaction.atomic():
            Notification.objects.create(preference=preference, item=item.key, why=why,
                                        text=_line(item, now, why),
                                        link=f"{settings.SITE_URL}{item.link}")
    except IntegrityError:
        return False
    return True


def _approvers() -> list[Any]:
    return list(get_user_model().objects.filter(groups__name=Role.APPROVER, is_active=True)
                .order_by("username"))


def notice_new_items(now: datetime) -> int:
    """Queue a notification for every preference about each item it has not heard of: a
    person's about what they may decide and their own agents to recertify (once per review
    date), a team's about its agents' items."""
    queued = 0
    people = listening().filter(user__isnull=False).select_related("user")
    by_user: dict[int, list[NotificationPreference]] = defaultdict(list)
    for preference in people:
        by_user[preference.user_id].append(preference)
    for preferences in by_user.values():
        # An owner who is no approver hears only of their own reminders (queue_for knows).
        if not has_role(preferences[0].user, Role.APPROVER, Role.OWNER):
            continue
        queued += _queue_new(preferences, inbox.queue_for(preferences[0].user, now), now)
    teams = list(listening().filter(user__isnull=True))
    if teams:
        everything = inbox.queue_for(None, now)
        labels = dict(Agent.objects.filter(name__in={e.agent for e in everything})
                      .values_list("name", "labels"))
        by_team: dict[str, list[inbox.Entry]] = defaultdict(list)
        for entry in everything:
            by_team[(labels.get(entry.agent) or {}).get("team")].append(entry)
        for preference in teams:
            queued += _queue_new([preference], by_team.get(preference.team, []), now)
    return queued


def _queue_new(preferences: list[NotificationPreference], entries: list[inbox.Entry],
               now: datetime) -> int:
    """_queue each item of `entries` for the preferences that have not heard of it. What they
    heard is read in one query and only the rest is drawn as items, so a sweep over a long
    queue costs the new items, not the whole queue, every minute."""
    if not entries:
        return 0
    heard = set(Notification.objects.filter(
        preference__in=preferences, why=NEW, item__in=[e.key for e in entries])
        .values_list("preference_id", "item"))
    fresh = [e for e in entries if any((p.pk, e.key) not in heard for p in preferences)]
    return sum(_queue(p, item, NEW, now) for item in inbox.items(fresh)
               for p in preferences if (p.pk, item.key) not in heard)


def notice_breaches(now: datetime) -> list[SlaBreach]:
    """Every waiting item past its SLA or deadline, once: an alert, an audit row, and the next
    approver (the first by name who may decide it and is not its assignee) notified."""
    breaches = []
    overdue = inbox.items([e for e in inbox.queue_for(None, now) if e.deadline <= now])
    known = set(SlaBreach.objects.filter(item__in=[i.key for i in overdue])
                .values_list("item", flat=True))
    for item in (i for i in overdue if i.key not in known):
        with transaction.atomic():
            breach, made = SlaBreach.objects.get_or_create(
                item=item.key, defaults={"agent": item.agent, "deadline": item.deadline})
            if not made:
                continue
            nxt = _next_approver(item, now)
            breach.notified = nxt.username if nxt else ""
            breach.save(update_fields=["notified"])
            audit.record(actor="system:sla", action=AuditAction.INBOX_SLA_BREACHED,
                         target=item.key, agent=item.agent,
                         after={"deadline": item.deadline.isoformat(),
                                "next_approver": breach.notified or None})
            broadcast(AlertKind.INBOX_SLA_BREACHED, {
                "agent": item.agent, "item": item.key, "kind": item.kind,
                "severity": "high", "link": item.link,
                "message": f"{item.kind} for {item.agent} is past its SLA"
                           + (f"; {breach.notified} notified" if breach.notified else "")})
            if nxt is not None:
                for preference in listening().filter(user=nxt):
                    _queue(preference, item, BREACH, now)
        breaches.append(breach)
    return breaches


def _next_approver(item: inbox.Item, now: datetime) -> Any:
    assignees = set(item.assignee.split(", ")) if item.assignee else set()
    for approver in _approvers():
        if approver.username in assignees:
            continue
        if any(e.key == item.key for e in inbox.queue_for(approver, now)):
            return approver
    return None




def sweep(now: datetime | None = None) -> dict[str, int]:
    """One pass: notice new items and breaches, then send what is due."""
    now = now or timezone.now()
    queued = notice_new_items(now)
    breaches = notice_breaches(now)
    return {"queued": queued, "breaches": len(breaches), "sent": deliver(now)}
