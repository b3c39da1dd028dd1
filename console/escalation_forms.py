"""Forms of the reconciliation pages: they only clean input; the actions decide and change
state (and refuse what they must, e.g. a snooze time in the past)."""

from datetime import UTC, datetime, time, timedelta

from django import forms
from django.utils import timezone

from reconciliation.actions.escalations import SNOOZE_LIMIT

# Until when a snooze button snoozes, from now (UTC, as every time on the pages).
SNOOZE_PRESETS = {
    "snooze_1h": ("1 h", lambda now: now + timedelta(hours=1)),
    "snooze_4h": ("4 h", lambda now: now + timedelta(hours=4)),
    "snooze_tomorrow": ("until tomorrow 09:00 UTC",
                        lambda now: datetime.combine(now.date() + timedelta(days=1), time(9),
                                                     tzinfo=now.tzinfo)),
}
SNOOZE_UNTIL = "snooze_until"  # the button next to the date-and-time field


class TriageForm(forms.Form):
    """Assign to me, acknowledge, or snooze (a preset, or until a chosen date and time in
    UTC, read from an `<input type="datetime-local">`)."""

    triage = forms.ChoiceField(choices=[("assign", "assign"), ("acknowledge", "acknowledge"),
                                        *((key, label) for key, (label, _) in
                                          SNOOZE_PRESETS.items()),
                                        (SNOOZE_UNTIL, "until")])
    until = forms.DateTimeField(required=False, input_formats=[
        "%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%d %H:%M:%S"])

    def clean(self) -> dict:
        data = super().clean()
        if data.get("triage") == SNOOZE_UNTIL and not data.get("until") \
                and "until" not in self.errors:
            self.add_error("until", "Choose the date and time to snooze until.")
        return data

    def action_arguments(self) -> dict:
        """Keyword arguments of triage_escalation."""
        choice = self.cleaned_data["triage"]
        if choice in SNOOZE_PRESETS:
            return {"snooze_until": SNOOZE_PRESETS[choice][1](timezone.now())}
        if choice == SNOOZE_UNTIL:
            return {"snooze_until": self.cleaned_data["until"]}
        return {"assign": choice == "assign", "acknowledge": choice == "acknowledge"}


class ResolveForm(forms.Form):
    """A resolution (one of the escalation's own) and the required comment."""

    resolution = forms.CharField(max_length=16)
    comment = forms.CharField(required=False, max_length=2000)


def snooze_bounds(now: datetime | None = None) -> tuple[str, str]:
    """The `min` and `max` of the date-and-time field, as the browser wants them."""
    now = (now or timezone.now()).astimezone(UTC)
    return (f"{now:%Y-%m-%dT%H:%M}", f"{now + SNOOZE_LIMIT:%Y-%m-%dT%H:%M}")
