"""Forms of the registry's pages: they only clean input; the actions decide and change state."""

import re
from typing import Any

from django import forms

from registry.choices import GuardrailEffect, OverdueEffect

# The shape of a label (DESIGN.md §4), loosely: the actions and the manifest schema are stricter.
_SELECTOR_KEY = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._/-]*[A-Za-z0-9])?")
_SELECTOR_VALUE = re.compile(r"(?:[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)?")


def selector_to_text(selector: dict[str, str]) -> str:
    """A selector as the `key=value` lines the form edits."""
    return "\n".join(f"{key}={value}" for key, value in sorted(selector.items()))


class ManifestForm(forms.Form):
    """The apply page: YAML text (validated by registry.intake) and whether to dry-run."""

    manifest = forms.CharField(required=False, strip=False, widget=forms.Textarea)
    dry_run = forms.BooleanField(required=False)
    reason = forms.CharField(required=False, max_length=2000)  # the review thread's first entry


class DecisionForm(forms.Form):
    """Approve or reject: an optional comment (the action insists on one for a rejection) and
    the generation the approver saw, so a proposal overtaken meanwhile is refused."""

    comment = forms.CharField(required=False, max_length=2000)
    expected_generation = forms.IntegerField(required=False, min_value=0)
    otp = forms.CharField(required=False, max_length=12)  # step-up: a current TOTP code


class GuardrailForm(forms.Form):
    """A guardrail's fields; the CEL expression is checked by the action, not here."""

    name = forms.SlugField(max_length=63)
    description = forms.CharField(required=False, widget=forms.Textarea)
    expression = forms.CharField(widget=forms.Textarea, max_length=4000, strip=False)
    selector = forms.CharField(required=False, widget=forms.Textarea,
                               help_text="One key=value per line; empty selects every agent.")
    effect = forms.ChoiceField(choices=GuardrailEffect.choices)
    required_approvals = forms.IntegerField(min_value=0, max_value=5, initial=2)
    message = forms.CharField(max_length=500)
    enabled = forms.BooleanField(required=False, initial=True)
    overdue_effect = forms.ChoiceField(choices=[("", "warn (default)"), *OverdueEffect.choices],
                                       required=False)
    safe_tools = forms.CharField(required=False, max_length=4000,
                                 help_text="For restrict: the tools an overdue agent keeps, "
                                           "separated by commas.")

    def __init__(self, *args: Any, editing: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if editing:
            # The name is the guardrail's identity: it is shown, never edited.
            del self.fields["name"]

    def clean_selector(self) -> dict[str, str]:
        selector: dict[str, str] = {}
        problems = []
        for number, raw in enumerate(self.cleaned_data["selector"].splitlines(), start=1):
            line = raw.strip()
            if not line:
                continue
            key, sep, value = (part.strip() for part in line.partition("="))
            if not sep or not _SELECTOR_KEY.fullmatch(key) or not _SELECTOR_VALUE.fullmatch(value):
                problems.append(f"line {number}: expected key=value; got {line!r}")
            elif key in selector:
                problems.append(f"line {number}: the key {key!r} appears twice")
            else:
                selector[key] = value
        if problems:
            raise forms.ValidationError(problems)
        return selector

    def clean_safe_tools(self) -> list[str]:
        return [tool.strip() for tool in self.cleaned_data["safe_tools"].split(",")
                if tool.strip()]

    def action_fields(self) -> dict[str, Any]:
        """The cleaned fields as keyword arguments of create_guardrail / update_guardrail."""
        return {name: self.cleaned_data[name] for name in self.fields}


class RollbackForm(forms.Form):
    """Roll back: the earlier approved generation to propose again, and an optional reason."""

    generation = forms.IntegerField(min_value=1, max_value=2**31 - 1)
    comment = forms.CharField(required=False, max_length=2000)


class WaiverForm(forms.Form):
    """A waiver: the pointer it allows, why, the ticket, and for how long (the action checks)."""

    pointer = forms.CharField(max_length=1000)
    reason = forms.CharField(max_length=2000)
    ticket = forms.CharField(max_length=100)
    duration = forms.CharField(max_length=16)
    otp = forms.CharField(max_length=12, required=False)  # when its change needs step-up


class RetireForm(forms.Form):
    """Retire: why (the action insists on a reason)."""

    reason = forms.CharField(max_length=2000)


class StepUpCodeForm(forms.Form):
    """A current code from the person's authenticator (step-up), empty when not asked for."""

    otp = forms.CharField(required=False, max_length=12)


class EnrolForm(forms.Form):
    """Confirm a new authenticator with its code (and the old one's, when replacing it)."""

    device = forms.IntegerField(min_value=1)
    code = forms.CharField(max_length=12)
    current_code = forms.CharField(required=False, max_length=12)
