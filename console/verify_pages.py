"""The audit trail's verification as a page for compliance: what range is proven, by which
signed checkpoints and witnesses, or the first bad entry and why."""

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from audit import witnesses
from audit.export import FORMATS
from audit.models import AuditCheckpoint
from audit.verify import verify_trail
from registry.choices import Role
from registry.roles import has_role


@login_required
def verify_page(request: HttpRequest) -> HttpResponse:
    """Walk the chain, its checkpoints and witness copies now, and show the outcome."""
    if not has_role(request.user, Role.COMPLIANCE):
        raise PermissionDenied("Verifying the audit trail is for compliance staff.")
    report = verify_trail()
    latest = AuditCheckpoint.objects.order_by("-seq").first()
    held = [{"url": url, "copies": len(witnesses.copies(url))}
            for url in witnesses.readable_witnesses()]
    return render(request, "audit/verify.html", {
        "report": report, "latest": latest, "witnesses": held, "checked_at": timezone.now(),
        "formats": sorted(FORMATS)})
