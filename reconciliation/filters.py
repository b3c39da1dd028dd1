"""Declared list filters (django-filter) for findings and escalations, shared by the API and
the pages: each parameter maps to one fixed lookup."""

import django_filters
from django.db.models import QuerySet

from reconciliation.choices import EscalationStatus, FindingStatus, Severity
from reconciliation.incidents import incident_filter
from reconciliation.models import Escalation, Finding

SOURCES = [("config", "configuration"), ("behaviour", "behaviour")]


class FindingFilterSet(django_filters.FilterSet):
    """Findings by agent name, status, severity, kind, and where they were found."""

    agent = django_filters.CharFilter(field_name="agent__name", max_length=63)
    status = django_filters.ChoiceFilter(choices=FindingStatus.choices)
    severity = django_filters.ChoiceFilter(choices=[(s.value, s.value) for s in Severity])
    kind = django_filters.CharFilter(max_length=32)
    source = django_filters.ChoiceFilter(choices=SOURCES, method="found_in",
                                         help_text="config or behaviour")
    cause = django_filters.CharFilter(field_name="cause_key", max_length=200,
                                      help_text="a cause key: deployment:<id>, change:<id>, "
                                                "changed-by:<actor>, proposal:<id> or unknown")
    incident = django_filters.NumberFilter(
        method="in_incident", min_value=1,
        help_text="a finding id: that finding and the others its cause produced (the "
                  "incident an alert links to)")

    class Meta:
        model = Finding
        fields: list[str] = []

    def in_incident(self, queryset: QuerySet[Finding], name: str,
                    value: int) -> QuerySet[Finding]:
        first = Finding.objects.filter(pk=value).first()
        return queryset.filter(**incident_filter(first)) if first else queryset.none()

    def found_in(self, queryset: QuerySet[Finding], name: str, value: str) -> QuerySet[Finding]:
        return queryset.filter(behaviour=value == "behaviour")


class EscalationFilterSet(django_filters.FilterSet):
    """Escalations by status (open or resolved)."""

    status = django_filters.ChoiceFilter(choices=EscalationStatus.choices)

    class Meta:
        model = Escalation
        fields: list[str] = []
