"""Telling approvers where they work (and owners of their agents to recertify): preferences
(email or a Slack/Teams-compatible incoming webhook, per person or per team, immediate or
digest), the sweep that notices new inbox items and SLA breaches, and the sending, each sent
notification audited."""

import hashlib
import hmac
import json
import logging
import secrets
from collections import defaultdict
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.mail import send_mail
from django.core.validators import validate_email
from django.db import IntegrityError, transaction
from django.utils import timezone

import audit
from audit.alert_kinds import AlertKind
from audit.choices import AuditAction
from config import outbound
from config.errors import Conflict, Invalid, NotAllowed, NotFound
from registry import inbox, signals
from registry.choices import NotifyChannel, NotifyMode, Role
from registry.models import Agent, Notification, NotificationPreference, SlaBreach
from registry.principals import AgentPrincipal
from registry.roles import has_role
from registry.signals import announce

log = logging.getLogger(__name__)
NEW, BREACH = "new", "breach"


# --- preferences ------------------------------------------------------------------------------


def _check_target(channel: str, target: str) -> None:
    if channel == NotifyChannel.EMAIL:
        try:
            validate_email(target)
        except ValidationError:
            raise Invalid("Not an email address.", details=[
                {"pointer": "/target", "message": "an email address"}]) from None
        return
    if not outbound.listed(target, settings.NOTIFY_WEBHOOK_HOSTS):
        raise Invalid("Webhooks go only to hosts the operator allowed (NOTIFY_WEBHOOK_HOSTS).",
                      details=[{"pointer": "/target",
                                "message": "an http(s) URL on an allowed host"}])


@transaction.atomic
def set_preference(*, actor: Any, channel: str, target: str, mode: str = NotifyMode.IMMEDIATE,
                   team: str = "", user: Any = None) -> NotificationPreference:
    """Add where `user` (by default the actor) or a team hears about inbox items. A person sets
    their own; a team's channel, or someone else's, is an admin's to set."""
    if isinstance(actor, AgentPrincipal) or not getattr(actor, "pk", None):
        raise NotAllowed("Notification preferences are for people.")
    user = None if team else (user or actor)
    if (team or user.pk != actor.pk) and not has_role(actor, Role.ADMIN):
        raise NotAllowed("A team's notifications, or another person's, are set by an admin.")
    if channel not in NotifyChannel.values:
        raise Invalid("Unknown channel.", details=[
            {"pointer": "/channel", "message": f"one of {', '.join(NotifyChannel.values)}"}])
    if mode not in NotifyMode.values:
        raise Invalid("Unknown mode.", details=[
            {"pointer": "/mode", "message": f"one of {', '.join(NotifyMode.values)}"}])
    if len(target) > 500 or len(team) > 63:
        raise Invalid("Too long.", details=[{"pointer": "/target", "message": "at most 500"}])
    _check_target(channel, target)
    owned = NotificationPreference.objects.select_for_update().filter(
        **({"team": team, "user__isnull": True} if team else {"user": user}))
    held = list(owned.values_list("channel", "target"))
    if (channel, target) in held:
        raise Conflict("That address is already there.", code="duplicate_address")
    if len(held) >= settings.NOTIFY_MAX_ADDRESSES:
        raise Invalid(f"At most {settings.NOTIFY_MAX_ADDRESSES} notification addresses "
                      f"{'per team' if team else 'per person'}: remove one first.",
                      code="too_many_addresses", details=[
                          {"pointer": "/target",
                           "message": f"at most {settings.NOTIFY_MAX_ADDRESSES}"}])
    token = secrets.token_urlsafe(24)
    preference = NotificationPreference.objects.create(
        user=user, team=team, channel=channel, target=target, mode=mode, created_by=actor,
        verify_token_sha256=_digest(token))
    audit.record(actor=actor, action=AuditAction.NOTIFICATION_PREFERENCE_SET,
                 target=f"notification-preference:{preference.pk}", after=preference.to_dict())
    transaction.on_commit(lambda: send_verification(preference.pk, token), robust=True)
    preference.verification_token = token  # for the caller in this process; never served
    return preference


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def verify_link(preference_id: int, token: str) -> str:
    """The page that confirms an address (signed in as its person, or an admin)."""
    return f"{settings.SITE_URL}/account/notifications/{preference_id}/verify?token={token}"


def send_verification(preference_id: int, token: str) -> bool:
    """Send the address its token, and nothing else, so only someone who reads it can turn it
    on (after commit; audited whether or not it went)."""
    preference = NotificationPreference.objects.filter(pk=preference_id).first()
    if preference is None or preference.verified_at is not None:
        return False
    text = (f"Someone asked for agent-governance notifications to be sent here. If that was "
            f"you, confirm it: {verify_link(preference.pk, token)} (or POST the token "
            f"{token} to /api/v1/notifications/preferences/{preference.pk}/verify). Nothing "
            "else is sent here until it is confirmed.")
    try:
        if preference.channel == NotifyChannel.EMAIL:
            send_mail("[agent-governance] confirm this notification address", text,
                      settings.DEFAULT_FROM_EMAIL, [preference.target])
        else:
            _post_webhook(preference.target, text)
        error = ""
    except Exception as failure:  # noqa: BLE001 - recorded and audited
        error = f"{type(failure).__name__}: {failure}"[:500] or "failed"
    with transaction.atomic():
        audit.record(actor="system:notify",
                     action=(AuditAction.NOTIFICATION_FAILED if error
                             else AuditAction.NOTIFICATION_VERIFICATION_SENT),
                     target=f"notification-preference:{preference.pk}",
                     after={"channel": preference.channel, "verification": True}, reason=error)
    return not error


def may_verify(preference: NotificationPreference, actor: Any) -> bool:
    """Its person, or an admin (a team's, or one an admin set for someone)."""
    if isinstance(actor, AgentPrincipal) or not getattr(actor, "pk", None):
        return False
    return preference.user_id == actor.pk or has_role(actor, Role.ADMIN)


@transaction.atomic
def verify_preference(preference_id: int, *, actor: Any, token: str) -> NotificationPreference:
    """Turn an address on with the token that was sent to it: proof that whoever set it reads
    it. A wrong token changes nothing."""
    preference = (NotificationPreference.objects.select_for_update()
                  .filter(pk=preference_id).first())
    if preference is None or not may_verify(preference, actor):
        raise NotFound(f"No notification preference {preference_id}.")
    if preference.verified_at is not None:
        raise Conflict("That address is already confirmed.", code="already_verified")
    if not isinstance(token, str) or not preference.verify_token_sha256 or (
            not hmac.compare_digest(_digest(token), preference.verify_token_sha256)):
        raise Invalid("That is not the token sent to this address.", code="wrong_token",
                      details=[{"pointer": "/token", "message": "the token sent to it"}])
    preference.verified_at, preference.verify_token_sha256 = timezone.now(), ""
    preference.save(update_fields=["verified_at", "verify_token_sha256"])
    audit.record(actor=actor, action=AuditAction.NOTIFICATION_PREFERENCE_VERIFIED,
                 target=f"notification-preference:{preference.pk}", after=preference.to_dict())
    return preference


@transaction.atomic
def delete_preference(preference_id: int, *, actor: Any) -> None:
    """Remove a preference: one's own, or any as an admin."""
    preference = NotificationPreference.objects.filter(pk=preference_id).first()
    if preference is None or not (preference.user_id == getattr(actor, "pk", None)
                                  or has_role(actor, Role.ADMIN)):
        raise NotFound(f"No notification preference {preference_id}.")
    before = preference.to_dict()
    preference.delete()
    audit.record(actor=actor, action=AuditAction.NOTIFICATION_PREFERENCE_DELETED,
                 target=f"notification-preference:{preference_id}", before=before)


# --- the sweep: what to tell whom --------------------------------------------------------------


def listening() -> Any:
    """The preferences anything may be sent to: confirmed addresses of active people (a
    deactivated person hears nothing more, queued or new) and of teams."""
    return NotificationPreference.objects.filter(verified_at__isnull=False).exclude(
        user__is_active=False)


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
            announce(signals.alert_raised, event=AlertKind.INBOX_SLA_BREACHED, payload={
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


# --- sending -----------------------------------------------------------------------------------


def deliver(now: datetime) -> int:
    """Send what is due: immediate notifications and breaches now, a digest preference's
    waiting ones in one message once its period has passed. Returns messages sent."""
    sent = 0
    due = (Notification.objects.filter(sent_at__isnull=True, error="",
                                       preference__in=listening())
           .select_related("preference").order_by("created_at"))
    grouped: dict[int, list[Notification]] = defaultdict(list)
    for notification in due:
        grouped[notification.preference_id].append(notification)
    period = timedelta(minutes=settings.NOTIFY_DIGEST_MINUTES)
    for notifications in grouped.values():
        preference = notifications[0].preference
        if preference.mode == NotifyMode.DIGEST:
            urgent = [n for n in notifications if n.why == BREACH]
            waiting = [n for n in notifications if n.why != BREACH]
            for notification in urgent:
                sent += _send(preference, [notification], now)
            last = preference.last_digest_at or preference.created_at
            if waiting and now - last >= period:
                sent += _send(preference, waiting, now, digest=True)
        else:
            for notification in notifications:
                sent += _send(preference, [notification], now)
    return sent


def _send(preference: NotificationPreference, notifications: list[Notification],
          now: datetime, digest: bool = False) -> int:
    count = len(notifications)
    subject = (f"{count} inbox item{'s' if count != 1 else ''} waiting" if digest
               else notifications[0].text.split(" · ")[0] + f" · {notifications[0].item}")
    text = "\n".join(n.text for n in notifications)
    try:
        if preference.channel == NotifyChannel.EMAIL:
            send_mail(f"[agent-governance] {subject}", text, settings.DEFAULT_FROM_EMAIL,
                      [preference.target])
        else:
            _post_webhook(preference.target, text)
        error = ""
    except Exception as failure:  # noqa: BLE001 - recorded and audited, never retried blindly
        error = f"{type(failure).__name__}: {failure}"[:500] or "failed"
        log.warning("notification to preference %s failed: %s", preference.pk, error)
    with transaction.atomic():
        Notification.objects.filter(pk__in=[n.pk for n in notifications]).update(
            sent_at=None if error else now, error=error)
        if digest and not error:
            NotificationPreference.objects.filter(pk=preference.pk).update(last_digest_at=now)
        audit.record(actor="system:notify",
                     action=(AuditAction.NOTIFICATION_FAILED if error
                             else AuditAction.NOTIFICATION_SENT),
                     target=f"notification-preference:{preference.pk}",
                     after={"channel": preference.channel, "mode": preference.mode,
                            "digest": digest, "items": [n.item for n in notifications],
                            "why": sorted({n.why for n in notifications})},
                     reason=error)
    return 0 if error else 1


def _post_webhook(url: str, text: str) -> None:
    """POST `{"text": ...}` through the outbound guard (checked again now, on the address it
    resolves to now); anything but 2xx is a failure."""
    destination = outbound.check(url, settings.NOTIFY_WEBHOOK_HOSTS)
    query = urlsplit(url).query
    target = (destination.path or "/") + (f"?{query}" if query else "")
    answer = outbound.send(destination, "POST", target,
                           {"Content-Type": "application/json"},
                           json.dumps({"text": text}).encode(), timeout=5,
                           max_bytes=settings.OUTBOUND_MAX_ANSWER_BYTES)
    if not 200 <= answer.status < 300:
        raise OSError(f"webhook answered {answer.status}")


def sweep(now: datetime | None = None) -> dict[str, int]:
    """One pass: notice new items and breaches, then send what is due."""
    now = now or timezone.now()
    queued = notice_new_items(now)
    breaches = notice_breaches(now)
    return {"queued": queued, "breaches": len(breaches), "sent": deliver(now)}
