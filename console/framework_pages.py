"""Framework evidence for compliance: one framework's controls for an agent or the fleet over
a period, green, amber or red, each with the audit entries that show it; the signed bundle's
download; and compliance's own controls and mappings (the same actions as the API)."""

from datetime import UTC, datetime, time, timedelta

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import urlencode
from django.views.decorators.http import require_POST

from compliance import actions, framework_report
from compliance.choices import EvidenceQuery
from compliance.evidence_queries import TooMuchEvidence
from config.errors import DomainError
from registry.choices import Role
from registry.models import Agent
from registry.roles import has_role

DEFAULT_DAYS = 30


class ReportForm(forms.Form):
    framework = forms.CharField(max_length=63, required=False)
    agent = forms.CharField(max_length=63, required=False)
    start = forms.DateField(required=False)
    end = forms.DateField(required=False)

    def clean(self) -> dict:
        data = super().clean()
        if data.get("start") and data.get("end") and data["start"] > data["end"]:
            raise forms.ValidationError("The period starts after it ends.")
        return data


def _compliance(request: HttpRequest) -> None:
    if not has_role(request.user, Role.COMPLIANCE):
        raise PermissionDenied("Framework evidence is for compliance staff.")


@login_required
def frameworks_page(request: HttpRequest) -> HttpResponse:
    """The report of the chosen framework, agent (or fleet) and period (dates, UTC, inclusive)."""
    _compliance(request)
    known = framework_report.frameworks()
    form = ReportForm(request.GET or None)
    data = form.cleaned_data if form.is_valid() else {}
    chosen = data.get("framework") or next(iter(known), "")
    agent = data.get("agent") or ""
    today = timezone.now().date()
    end_day = data.get("end") or today
    start_day = data.get("start") or end_day - timedelta(days=DEFAULT_DAYS)
    start = datetime.combine(start_day, time.min, tzinfo=UTC)
    end = datetime.combine(end_day, time.max, tzinfo=UTC)
    report, problem = None, form.errors.get("__all__", [""])[0] if form.errors else ""
    if chosen in known and not problem and (not agent or Agent.objects.filter(
            name=agent).exists()):
        try:
            report = framework_report.report(chosen, agent, start, end)
        except TooMuchEvidence as error:
            problem = str(error)
    elif not problem:
        problem = f"No framework {chosen!r}." if chosen not in known else \
            f"No agent named {agent!r}."
    query = urlencode({"agent": agent, "from": start.isoformat(), "to": end.isoformat()})
    return render(request, "compliance/frameworks.html", {
        "frameworks": known.values(), "chosen": chosen, "agent": agent,
        "start": start_day.isoformat(), "end": end_day.isoformat(), "report": report,
        "problem": problem, "queries": EvidenceQuery.choices,
        "bundle_url": reverse("framework-evidence", args=[chosen]) + "?" + query
        if report else ""})


def _back(request: HttpRequest, framework: str) -> HttpResponse:
    """To the report the form was posted from (its framework, agent and period)."""
    shown = {k: request.POST.get(k, "") for k in ("agent", "start", "end")}
    return redirect(reverse("frameworks-page") + "?" + urlencode(
        {"framework": framework, **{k: v for k, v in shown.items() if v}}))


@login_required
@require_POST
def control_save(request: HttpRequest) -> HttpResponse:
    """Add a control, or change a control's title and evidence queries (a new version)."""
    framework = request.POST.get("framework", "")
    try:
        row = actions.save_control(
            actor=request.user, framework=framework,
            control_id=request.POST.get("control_id", "").strip(),
            title=request.POST.get("title", ""), queries=request.POST.getlist("queries"),
            reason=request.POST.get("reason", ""))
    except DomainError as error:
        pointers = [d.get("pointer", "") for d in error.details if d.get("pointer")]
        messages.error(request, error.message + (f" ({', '.join(pointers)})" if pointers
                                                 else ""))
        return _back(request, framework)
    messages.success(request, f"Control {row.control_id} of {row.framework} saved as "
                              f"version {row.version}.")
    return _back(request, row.framework)
