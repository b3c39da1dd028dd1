"""The toxic combinations page: the rules, the paths the fleet had when the workers last
looked (reconciliation/fleet_snapshot.py), and (for compliance staff) the form that declares
a new pair."""

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.utils.html import escape
from django.views.decorators.http import require_POST

from config.errors import DomainError
from console.page_render import render_page
from console.registry_pages import _forbidden
from reconciliation import fleet_snapshot
from registry import actions
from registry.choices import Role, ToxicEffect
from registry.models import ToxicCombination
from registry.roles import has_role, sees_everything
from registry.toxic import CAPABILITY_EXPECTED


class ToxicCombinationForm(forms.Form):
    """Declare two capabilities that must not meet."""

    name = forms.SlugField(max_length=63)
    # Django renders help text as HTML: escaped, "<resource>" reads as written, not as a tag
    left = forms.CharField(max_length=300, help_text=escape(CAPABILITY_EXPECTED))
    right = forms.CharField(max_length=300, help_text=escape(CAPABILITY_EXPECTED))
    effect = forms.ChoiceField(choices=ToxicEffect.choices)
    required_approvals = forms.IntegerField(min_value=2, max_value=5, initial=2)
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))


@login_required
def toxic_list(request: HttpRequest) -> HttpResponse:
    """Every toxic combination and the paths the approved and observed fleet have now."""
    can_edit = has_role(request.user, Role.COMPLIANCE)
    form = ToxicCombinationForm(request.POST or None)
    if request.method == "POST":
        if not can_edit:
            return _forbidden(request, "Only compliance staff manage toxic combinations.")
        if form.is_valid():
            try:
                rule = actions.create_toxic_combination(actor=request.user, **form.cleaned_data)
            except DomainError as error:
                for detail in error.details:
                    field = (detail.get("pointer") or "").strip("/")
                    form.add_error(field if field in form.fields else None, detail["message"])
                if not error.details:
                    form.add_error(None, error.message)
            else:
                messages.success(request, f"Declared toxic combination {rule.name}.")
                return redirect("registry-toxic")
    snapshot = fleet_snapshot.current()
    paths = snapshot.toxic_paths
    observed = sees_everything(request.user)  # what agents really run with: reviewers only
    return render_page(request, "registry/toxic_list.html", {
        "rules": ToxicCombination.objects.order_by("name"), "form": form, "can_edit": can_edit,
        "approved_paths": paths["approved"], "approved_count": paths["approved_count"],
        "sees_observed": observed,
        "observed_paths": paths["observed"] if observed else [],
        "observed_count": paths["observed_count"] if observed else 0,
        "freshness": fleet_snapshot.freshness(snapshot),
    }, status=400 if form.errors else 200)


@login_required
@require_POST
def toxic_delete(request: HttpRequest, name: str) -> HttpResponse:
    """Compliance staff remove a toxic combination."""
    if not has_role(request.user, Role.COMPLIANCE):
        return _forbidden(request, "Only compliance staff manage toxic combinations.")
    actions.delete_toxic_combination(get_object_or_404(ToxicCombination, name=name),
                                     actor=request.user)
    messages.success(request, f"Removed toxic combination {name}.")
    return redirect("registry-toxic")
