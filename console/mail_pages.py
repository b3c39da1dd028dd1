"""The demo's mail sink (/mail/): with Django's file backend on (what `make demo` uses, having
no SMTP server), the emails the control plane sent, newest first, for admins and compliance.
With any other backend the page does not exist."""

import email
import email.policy
from pathlib import Path

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from registry.choices import Role
from registry.roles import has_role

FILE_BACKEND = "django.core.mail.backends.filebased.EmailBackend"
# The file backend writes each message followed by a line of 79 dashes.
SEPARATOR = b"\n" + b"-" * 79 + b"\n"
MAX_FILE_BYTES = 5 * 1024 * 1024


def sent_mail(folder: Path, limit: int = 100) -> list[dict[str, str]]:
    """The newest `limit` messages written under `folder`: from, to, subject, date, text."""
    files = sorted((f for f in folder.glob("*.log") if f.is_file()),
                   key=lambda f: f.stat().st_mtime, reverse=True) if folder.is_dir() else []
    messages: list[dict[str, str]] = []
    for path in files:
        if path.stat().st_size > MAX_FILE_BYTES:
            continue
        for raw in reversed([part for part in path.read_bytes().split(SEPARATOR) if part.strip()]):
            message = email.message_from_bytes(raw.lstrip(), policy=email.policy.default)
            body = message.get_body(preferencelist=("plain",))
            messages.append({"from": str(message["From"] or ""), "to": str(message["To"] or ""),
                             "subject": str(message["Subject"] or ""),
                             "date": str(message["Date"] or ""),
                             "text": body.get_content() if body is not None else ""})
            if len(messages) >= limit:
                return messages
    return messages


@login_required
def mail_sink(request: HttpRequest) -> HttpResponse:
    if settings.EMAIL_BACKEND != FILE_BACKEND:
        raise Http404("No mail sink: email goes to the configured mail server.")
    if not has_role(request.user, Role.COMPLIANCE):
        raise PermissionDenied("The mail sink is for compliance staff and admins.")
    return render(request, "registry/mail.html", {
        "messages_sent": sent_mail(Path(settings.EMAIL_FILE_PATH)),
        "folder": settings.EMAIL_FILE_PATH})
