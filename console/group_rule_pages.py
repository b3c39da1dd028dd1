"""Pages for group rules: the list (every person reads it; compliance staff declare a new one
there, through the same action as the API) and one rule with its breaches and, for
compliance, what it would have flagged over the fleet's last week (the what-if)."""

from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Count
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from config.errors import DomainError
from registry.choices import Role
from registry.roles import has_role
from runtime.actions.group_rules import create_group_rule
from runtime.group_rules import EFFECTS, MATCH_KEYS, MEASURES
from runtime.models import GroupBreach, GroupRule
from runtime.whatif import what_if


class GroupRuleForm(forms.Form):
    """A new group rule; the action validates what it means (the API's rules)."""

    name = forms.SlugField(max_length=63)
    description = forms.CharField(required=False, max_length=2000)
    labels = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}),
                             help_text="Selects agents with these labels: one key=value a line.")
    team = forms.CharField(required=False, max_length=63)
    owner = forms.CharField(required=False, max_length=150)
    framework = forms.CharField(required=False, max_length=63)
    measure = forms.ChoiceField(choices=[(m, m) for m in MEASURES],
                                help_text="events counts them; amount, tokens and cost sum them "
                                          "(tokens and cost make it a group budget).")
    match_action = forms.CharField(required=False, max_length=128, label="Only action")
    match_kind = forms.CharField(required=False, max_length=16, label="Only kind")
    limit = forms.FloatField(min_value=0)
    per = forms.CharField(max_length=8, help_text="A window such as 1h, 30m or 1d.")
    effect = forms.ChoiceField(choices=[(e, e) for e in EFFECTS])
    required_approvals = forms.IntegerField(min_value=1, max_value=5, initial=1)

    def rule_fields(self) -> dict[str, Any]:
        """The action's keyword arguments."""
        data = self.cleaned_data
        labels = dict(line.split("=", 1) for line in data["labels"].splitlines()
                      if "=" in line)
        selector = {k: v for k, v in (("team", data["team"]), ("owner", data["owner"]),
                                      ("framework", data["framework"])) if v}
        if labels:
            selector["labels"] = {k.strip(): v.strip() for k, v in labels.items()}
        match = {key: data[f"match_{key}"] for key in MATCH_KEYS
                 if data.get(f"match_{key}")}
        return {"name": data["name"], "description": data["description"],
                "selector": selector, "match": match, "measure": data["measure"],
                "limit": data["limit"], "per": data["per"], "effect": data["effect"],
                "required_approvals": data["required_approvals"]}

    def clean_labels(self) -> str:
        text = self.cleaned_data["labels"]
        bad = [line for line in text.splitlines() if line.strip() and "=" not in line]
        if bad:
            raise forms.ValidationError(f"expected key=value; got {bad[0]!r}")
        return text

RECENT_BREACHES = 20


@login_required
def group_rule_list(request: HttpRequest) -> HttpResponse:
    """Every group rule, what it selects and counts, and its breaches so far; compliance
    staff declare a new one here."""
    compliance = has_role(request.user, Role.COMPLIANCE)
    form = GroupRuleForm(request.POST or None)
    if request.method == "POST":
        if not compliance:
            return render(request, "registry/forbidden.html", {
                "message": "Only compliance staff manage group rules."}, status=403)
        if form.is_valid():
            try:
                rule = create_group_rule(actor=request.user, **form.rule_fields())
            except DomainError as error:
                for detail in error.details or [{"message": error.message}]:
                    field = (detail.get("pointer") or "").strip("/").split("/")[0]
                    form.add_error(field if field in form.fields else None,
                                   detail["message"])
            else:
                messages.success(request, f"Group rule {rule.name} saved: it counts from now.")
                return redirect("group-rules")
    rules = list(GroupRule.objects.annotate(breach_count=Count("breaches")).order_by("name"))
    return render(request, "reconciliation/group_rules.html", {
        "rules": rules, "is_compliance": compliance, "form": form,
        "sees_breaches": _sees_breaches(request.user)},
        status=400 if request.method == "POST" else 200)


def _sees_breaches(user: object) -> bool:
    """Breaches name agents across owners: those who review every agent's findings see them
    (approvers, compliance), as for findings; an owner sees the rules only."""
    return has_role(user, Role.APPROVER, Role.COMPLIANCE)


@login_required
def group_rule_detail(request: HttpRequest, name: str) -> HttpResponse:
    """One rule: its definition, recent breaches and (compliance) the what-if."""
    rule = GroupRule.objects.filter(name=name).first()
    if rule is None:
        raise Http404(f"No group rule {name!r}.")
    compliance = has_role(request.user, Role.COMPLIANCE)
    sees = _sees_breaches(request.user)
    breaches = (GroupBreach.objects.filter(rule=rule).order_by("-opened_at")[:RECENT_BREACHES]
                if sees else [])
    return render(request, "reconciliation/group_rule_detail.html", {
        "rule": rule, "breaches": breaches, "is_compliance": compliance, "sees_breaches": sees,
        "what_if": what_if(rule.to_spec()) if compliance else None})
