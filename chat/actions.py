"""Linking chat accounts to people, and answering a button click through exactly the
actions the console's approve, reject and resolve forms call (their authorisation, four
eyes and step-up, their audit rows)."""

import hashlib
import secrets
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from audit.actions import record
from audit.choices import AuditAction
from chat.choices import Button, Subject
from chat.models import ChatAccount, ChatLinkCode
from config.errors import Conflict, DomainError, Invalid, NotFound
from reconciliation.actions import resolve_escalation
from registry.actions import approve_proposal, reject_proposal
from registry.stepup import StepUpRequired

COMMENT = "Decided in {provider} by the linked account {external_id}"
PROPOSAL_BUTTONS = {Button.APPROVE, Button.REJECT}
ESCALATION_BUTTONS = {Button.ALLOW, Button.DENY, Button.REVERT, Button.ACKNOWLEDGE}


def _digest(code: str) -> str:
    return hashlib.sha256(code.strip().upper().encode()).hexdigest()


@transaction.atomic
def issue_link_code(*, actor: Any) -> tuple[str, ChatLinkCode]:
    """A one-time code the person sends from chat (`/agentgov link CODE`); only its digest is
    kept. Earlier unused codes of the person stop working."""
    ChatLinkCode.objects.filter(user=actor, used_at__isnull=True).delete()
    code = "-".join(secrets.token_hex(3).upper() for _ in range(3))
    row = ChatLinkCode.objects.create(
        user=actor, digest=_digest(code),
        expires_at=timezone.now() + timedelta(minutes=settings.CHAT_LINK_CODE_MINUTES))
    return code, row


@transaction.atomic
def link_account(*, provider: str, workspace: str, external_id: str, code: str) -> ChatAccount:
    """Link the chat account that sent a valid code to the person the code was issued to."""
    row = (ChatLinkCode.objects.select_for_update(no_key=True, of=("self",)).select_related("user")
           .filter(digest=_digest(code), used_at__isnull=True,
                   expires_at__gt=timezone.now()).first())
    if row is None:
        raise Invalid("That link code is not valid (wrong, used or expired): ask the console "
                      "for a new one.")
    if not row.user.is_active:
        raise Invalid("That person's account is not active.")
    row.used_at = timezone.now()
    row.save(update_fields=["used_at"])
    try:
        with transaction.atomic():
            account = ChatAccount.objects.create(user=row.user, provider=provider,
                                                 workspace=workspace, external_id=external_id)
    except IntegrityError:
        raise Conflict("This chat account is linked already; unlink it in the console "
                       "first.") from None
    record(actor=row.user, action=AuditAction.CHAT_ACCOUNT_LINKED,
           target=f"user:{row.user.username}", after=account.to_dict())
    return account


@transaction.atomic
def unlink_account(pk: int, *, actor: Any) -> None:
    """Remove a link (the person's own, or any for an admin: the API checks which)."""
    account = (ChatAccount.objects.select_for_update(no_key=True, of=("self",))
               .select_related("user").filter(pk=pk).first())
    if account is None:
        raise NotFound(f"No chat account {pk}.")
    record(actor=actor, action=AuditAction.CHAT_ACCOUNT_UNLINKED,
           target=f"user:{account.user.username}", before=account.to_dict())
    account.delete()


@dataclass(frozen=True)
class Answer:
    """What the chat is told after a click: whether it was done, and the words."""

    done: bool
    text: str
    code: str = ""


def linked_person(provider: str, workspace: str, external_id: str) -> Any:
    """The person a chat account is linked to, or None (never matched by name)."""
    account = (ChatAccount.objects.select_related("user")
               .filter(provider=provider, workspace=workspace, external_id=external_id,
                       user__is_active=True).first())
    return account.user if account is not None else None


def answer_click(*, provider: str, workspace: str, external_id: str, button: str,
                 value: str) -> Answer:
    """Carry out a click as the linked person, through the console's own actions."""
    person = linked_person(provider, workspace, external_id)
    if person is None:
        return Answer(False, "Your chat account is not linked to a person here: open the "
                             "console, ask for a link code and send `/agentgov link CODE`.",
                      "not_linked")
    subject, _, raw_pk = value.partition(":")
    if not raw_pk.isdigit() or (subject, button) not in _KNOWN:
        return Answer(False, "That button is not one this product sent.", "malformed")
    comment = COMMENT.format(provider=provider, external_id=external_id)
    pk = int(raw_pk)
    try:
        return _carry_out(subject, button, pk, person, comment)
    except StepUpRequired:
        return Answer(False, "This one needs step-up (a second factor): open the console to "
                             f"approve this one: {settings.SITE_URL}/proposals/{pk}/",
                      "step_up_required")
    except DomainError as error:
        return Answer(False, error.message, error.code)


_KNOWN = {(Subject.PROPOSAL.value, b.value) for b in PROPOSAL_BUTTONS} | {
    (Subject.ESCALATION.value, b.value) for b in ESCALATION_BUTTONS}


def _carry_out(subject: str, button: str, pk: int, person: Any, comment: str) -> Answer:
    who = person.username
    if subject == Subject.PROPOSAL and button == Button.APPROVE:
        version = approve_proposal(pk, actor=person, comment=comment)
        state = "approved and active" if version.state == "approved" else (
            "approved by you; it waits for another approver")
        return Answer(True, f"Proposal #{pk} {state} ({who}).")
    if subject == Subject.PROPOSAL:
        reject_proposal(pk, actor=person, comment=comment)
        return Answer(True, f"Proposal #{pk} rejected ({who}).")
    resolve_escalation(pk, actor=person, resolution=button, comment=comment)
    return Answer(True, f"Escalation #{pk} resolved: {button} ({who}).")
