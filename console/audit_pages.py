"""The audit explorer page for compliance."""

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from audit.choices import AuditAction
from audit.filters import AuditFilterSerializer, filter_entries
from audit.jsondiff import flat_changes
from audit.models import AuditEntry, AuditPendingEntry
from audit.sentences import entry_sentence
from registry.choices import Role
from registry.roles import has_role

PAGE_SIZE = 50


@login_required
def explorer(request: HttpRequest) -> HttpResponse:
    """Filterable, keyset-paginated trail (newest first), each entry with its readable diff."""
    if not has_role(request.user, Role.COMPLIANCE):
        raise PermissionDenied("The audit explorer is for compliance staff.")
    params = AuditFilterSerializer(data=request.GET)
    valid = params.is_valid()
    entries = []
    if valid:
        rows = list(
            filter_entries(AuditEntry.objects.all(), params.validated_data)
            .order_by("-seq")[: PAGE_SIZE + 1]
        )
        entries = [(entry, flat_changes(entry.before, entry.after), entry_sentence(entry))
                   for entry in rows[:PAGE_SIZE]]
        has_more = len(rows) > PAGE_SIZE
    else:
        has_more = False
    query = request.GET.copy()
    query.pop("before", None)
    return render(
        request,
        "audit/explorer.html",
        {
            "entries": entries,
            "errors": params.errors if not valid else {},
            "filters": request.GET,
            "actions": AuditAction.values,
            "next_before": entries[-1][0].seq if has_more and entries else None,
            "base_query": query.urlencode(),
            "pending": AuditPendingEntry.objects.count(),
        },
    )
