"""Enrolling a TOTP device for step-up, and verifying a code before a high-risk approval."""

from collections.abc import MutableMapping
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone
from django_otp.plugins.otp_totp.models import TOTPDevice

import audit
from audit.choices import AuditAction
from config.errors import Invalid, NotAllowed, NotFound
from registry.principals import AgentPrincipal
from registry.stepup import (
    StepUp,
    StepUpThrottled,
    confirmed_device,
    remember,
    remembered,
    required_error,
)

CODE_LENGTH = 6


def _well_formed(code: str) -> bool:
    # int() would take "１２３４５６" or " 1_2" too; only six ASCII digits are a code here.
    return len(code) == CODE_LENGTH and code.isascii() and code.isdigit()


def _person(actor: Any) -> None:
    if isinstance(actor, AgentPrincipal) or not getattr(actor, "is_authenticated", False):
        raise NotAllowed("Only a signed-in person enrols an authenticator.")


@transaction.atomic
def start_enrolment(*, actor: Any) -> TOTPDevice:
    """A new unconfirmed TOTP device for the person (replacing any unconfirmed one); it counts
    for nothing until it is confirmed with a code."""
    _person(actor)
    TOTPDevice.objects.filter(user=actor, confirmed=False).delete()
    device = TOTPDevice.objects.create(user=actor, name="authenticator", confirmed=False)
    audit.record(actor=actor, action=AuditAction.STEPUP_ENROLMENT_STARTED,
                 target=f"user:{actor.username}", after={"device": device.pk})
    return device


def _check_code(device_id: int, code: str) -> tuple[bool, datetime | None]:
    """Try one code on one device, locked so a code raced twice verifies once; a failure is
    counted for the throttle. Returns (verified, locked_until when the device refuses)."""
    device = TOTPDevice.objects.select_for_update(no_key=True).get(pk=device_id)
    allowed, info = device.verify_is_allowed()
    if not allowed:
        return False, (info or {}).get("locked_until")
    if not _well_formed(code):
        device.throttle_increment(commit=True)
        return False, None
    return device.verify_token(code), None


def _throttled(locked_until: datetime | None) -> StepUpThrottled:
    wait = max(1, int((locked_until - timezone.now()).total_seconds()) + 1) if locked_until else 1
    return StepUpThrottled(f"Too many wrong codes in a row: try again in {wait} seconds.",
                           details=[{"pointer": "/otp", "message": f"retry in {wait} s"}])


def confirm_device(device_id: int, *, actor: Any, code: str,
                   current_code: str = "") -> TOTPDevice:
    """Confirm the person's new device with a code from it; it replaces their confirmed device,
    which must then give a current code too (a stolen session cannot swap the authenticator).
    That code is checked in a transaction of its own, as an approval's is: a wrong one stays
    counted for the throttle and audited although the swap is refused (rolled back with the
    refusal, the codes could be tried without end)."""
    _person(actor)
    if not TOTPDevice.objects.filter(pk=device_id, user=actor, confirmed=False).exists():
        raise NotFound("No enrolment in progress: start again.")
    old = confirmed_device(actor)
    if old is not None:
        _prove_current_device(old, actor, current_code.strip())
    return _confirm(device_id, actor, code, old)


def _proven(device: TOTPDevice, actor: Any, code: str, reasons: list[str]) -> bool:
    """Whether `code` is a current one of the person's confirmed `device`, checked in a
    transaction of its own so that a wrong code stays counted for the throttle and audited
    although what it guarded is refused; 429 once the device refuses codes for a while."""
    with transaction.atomic():
        verified, locked_until = _check_code(device.pk, code)
        if not verified and locked_until is None:
            audit.record(actor=actor, action=AuditAction.STEPUP_FAILED,
                         target=f"user:{actor.username}",
                         after={"device": device.pk, "reasons": reasons})
    if locked_until is not None:
        raise _throttled(locked_until)
    return verified


def _prove_current_device(old: TOTPDevice, actor: Any, code: str) -> None:
    if not _proven(old, actor, code, ["replacing the authenticator"]):
        raise Invalid("Replacing your authenticator needs a current code from the old one.",
                      code="step_up_required",
                      details=[{"pointer": "/current_code", "message": "wrong or used"}])


@transaction.atomic
def _confirm(device_id: int, actor: Any, code: str, old: TOTPDevice | None) -> TOTPDevice:
    device = TOTPDevice.objects.select_for_update(no_key=True).filter(
        pk=device_id, user=actor, confirmed=False).first()
    if device is None:
        raise NotFound("No enrolment in progress: start again.")
    if getattr(confirmed_device(actor), "pk", None) != getattr(old, "pk", None):
        raise Invalid("Your authenticator changed meanwhile: start again.",
                      details=[{"pointer": "/device", "message": "changed meanwhile"}])
    verified, locked_until = _check_code(device.pk, code.strip())
    if locked_until:
        raise _throttled(locked_until)
    if not verified:
        raise Invalid("The code does not match: check the app's clock and type the code it "
                      "shows now.", details=[{"pointer": "/code", "message": "wrong code"}])
    before = {"device": old.pk} if old is not None else None  # delete() forgets its pk
    if old is not None:
        old.delete()
    device.confirmed = True
    device.save(update_fields=["confirmed"])
    audit.record(actor=actor, action=AuditAction.STEPUP_DEVICE_CONFIRMED,
                 target=f"user:{actor.username}", before=before,
                 after={"device": device.pk, "method": "totp"})
    return device


def verify_step_up(*, actor: Any, code: str, reasons: list[str],
                   session: MutableMapping | None = None) -> StepUp:
    """The proof that `actor` gave a fresh second factor: this session's recent one, or `code`
    checked now on their confirmed device (single use; wrong codes are counted and throttled,
    and each is audited). Runs in its own transaction so a failure stays counted although the
    approval it guarded is refused."""
    now = timezone.now()
    recent = remembered(session, actor, now)
    if recent is not None:
        return recent
    device = confirmed_device(actor)
    code = (code or "").strip()
    if device is None or not code:
        raise required_error(reasons, actor, problem="give a current code from your "
                                                     "authenticator app as `otp`.")
    if not _proven(device, actor, code, reasons):
        raise required_error(reasons, actor, problem="the code is wrong or was already used; "
                                                     "wait for the next one.")
    step_up = StepUp(device.pk, now)
    remember(session, step_up)
    return step_up


@transaction.atomic
def reset_authenticator(user: Any, *, actor: Any, reason: str) -> int:
    """Remove a person's authenticators (lost phone, or one a thief enrolled); they enrol again
    before their next step-up approval. Returns how many were removed."""
    devices = list(TOTPDevice.objects.filter(user=user).values_list("pk", flat=True))
    if devices:
        TOTPDevice.objects.filter(pk__in=devices).delete()
        audit.record(actor=actor, action=AuditAction.STEPUP_RESET,
                     target=f"user:{user.username}", before={"devices": devices},
                     after=None, reason=reason)
    return len(devices)
