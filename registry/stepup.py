"""Step-up: which approvals need a fresh second factor, and what proves one was given.

A proposal needs step-up when its risk is above STEPUP_RISK_THRESHOLD or a `step_up`
guardrail marks it; retiring an agent needs it whenever a threshold is set (it cannot be
undone). The proof is a TOTP code (django-otp) verified within STEPUP_MAX_AGE_SECONDS, either
in the same request or earlier in the same signed-in session; never across sessions or tokens.
"""

from collections.abc import MutableMapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django_otp.plugins.otp_totp.models import TOTPDevice

from config.errors import DomainError
from config.times import parse_timestamp
from registry.choices import GuardrailOutcome

SESSION_KEY = "stepup"
ENROL_PATH = "/account/two-factor/"


class StepUpRequired(DomainError):
    """The approval needs a fresh second factor that was missing, wrong or already used."""

    status, code = 403, "step_up_required"


class StepUpThrottled(DomainError):
    """Too many wrong codes in a row: the device refuses every code for a while."""

    status, code = 429, "step_up_throttled"


@dataclass(frozen=True)
class StepUp:
    """A second factor given by one person: which device, and when it was verified."""

    device_id: int
    verified_at: datetime

    def to_dict(self) -> dict[str, Any]:
        return {"method": "totp", "device": self.device_id,
                "verified_at": self.verified_at.isoformat()}

    def fresh(self, now: datetime) -> bool:
        return now - self.verified_at <= timedelta(seconds=settings.STEPUP_MAX_AGE_SECONDS)


def proposal_reasons(risk: int, guardrail_results: list[dict[str, Any]]) -> list[str]:
    """Why approving a proposal with this risk and these guardrail verdicts needs step-up
    (empty when it does not)."""
    reasons = []
    threshold = settings.STEPUP_RISK_THRESHOLD
    if threshold is not None and risk > threshold:
        reasons.append(f"its risk {risk} is above the step-up threshold {threshold}")
    reasons += [f"guardrail {r['guardrail']} asks for step-up" for r in guardrail_results
                if r.get("outcome") == GuardrailOutcome.REQUIRES_STEP_UP]
    return reasons


def retirement_reasons() -> list[str]:
    """Why retiring an agent needs step-up (empty when no threshold is set)."""
    if settings.STEPUP_RISK_THRESHOLD is None:
        return []
    return ["retiring an agent cannot be undone"]


def confirmed_device(user: Any) -> TOTPDevice | None:
    """The person's confirmed TOTP device (agents and strangers have none)."""
    if not getattr(user, "is_authenticated", False) or not hasattr(user, "totpdevice_set"):
        return None
    return TOTPDevice.objects.filter(user=user, confirmed=True).order_by("-pk").first()


def remembered(session: MutableMapping | None, user: Any, now: datetime) -> StepUp | None:
    """The step-up this signed-in session gave recently, if its device is still confirmed."""
    if session is None:
        return None
    saved = session.get(SESSION_KEY)
    if not isinstance(saved, dict):
        return None
    try:
        step_up = StepUp(int(saved["device"]), parse_timestamp(saved["verified_at"]))
    except (KeyError, TypeError, ValueError):
        return None
    device = confirmed_device(user)
    if device is None or device.pk != step_up.device_id or not step_up.fresh(now):
        return None
    return step_up


def remember(session: MutableMapping | None, step_up: StepUp) -> None:
    """Keep a step-up in the signed-in session so the next approvals within the window do not
    need another code (a code is single use, so each would otherwise wait for the next one)."""
    if session is not None:
        session[SESSION_KEY] = {"device": step_up.device_id,
                                "verified_at": step_up.verified_at.isoformat()}


def required_error(reasons: list[str], user: Any, *, problem: str) -> StepUpRequired:
    """The error that tells the approver what is needed: enrol first, or a current code."""
    why = "; ".join(reasons)
    if confirmed_device(user) is None:
        return StepUpRequired(
            f"This approval needs step-up ({why}): enrol an authenticator app at "
            f"{ENROL_PATH} first, then approve with a current code.",
            details=[{"pointer": "/otp", "message": "no confirmed TOTP device: enrol one at "
                                                    f"{ENROL_PATH}"}])
    return StepUpRequired(f"This approval needs step-up ({why}): {problem}",
                          details=[{"pointer": "/otp", "message": problem}])
