"""Telling approvers where they work (and owners of their agents to recertify): preferences
(email or a Slack/Teams-compatible incoming webhook, per person or per team, immediate or
digest) and the sending, each sent notification audited. What to tell whom (the sweep that
notices new inbox items and SLA breaches) is the inbox's, in
reconciliation/actions/inbox_notices.py."""

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
from django.core.exceptions import ValidationError
from django.core.mail import send_mail
from django.core.validators import validate_email
from django.db import transaction
from django.utils import timezone

import audit
from audit.choices import AuditAction
from config import outbound
from config.errors import Conflict, Invalid, NotAllowed, NotFound
from registry.choices import NotifyChannel, NotifyMode, Role
from registry.models import Notification, NotificationPreference
from registry.principals import AgentPrincipal
from registry.roles import has_role

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
    owned = NotificationPreference.objects.select_for_update(no_key=True).filter(
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
    preference = (NotificationPreference.objects.select_for_update(no_key=True)
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


# --- who hears ---------------------------------------------------------------------------------


def listening() -> Any:
    """The preferences anything may be sent to: confirmed addresses of active people (a
    deactivated person hears nothing more, queued or new) and of teams."""
    return NotificationPreference.objects.filter(verified_at__isnull=False).exclude(
        user__is_active=False)


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
