"""Declared list filters (django-filter) for agents and proposals, shared by the API and the
pages: each parameter maps to one fixed lookup, so no query string chooses a database lookup.

The agent list also filters by where the loop left each agent (health, sync): reconciliation
knows those words, so it extends AgentFilterSet and registers the result from its
AppConfig.ready (reconciliation/agent_filters.py). Fails closed: with nothing registered the
agent list is an error, never a list that quietly ignores `?health=`."""

from typing import Any

import django_filters
from django import forms
from django.core.exceptions import ImproperlyConfigured
from django.db.models import Q, QuerySet
from django.db.models.fields.json import KeyTransform
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field

from registry.choices import Lifecycle, VersionState
from registry.manifest import LABEL_KEY_EXPECTED, LABEL_VALUE_EXPECTED, is_label_key, is_label_value
from registry.models import Agent, DesiredStateVersion

LABEL_HELP = ("key=value: the agent has this label. The key and value follow the manifest's "
              "label rules; the key is matched as a plain key.")


class LabelField(forms.CharField):
    """`key=value` by the manifest's label rules, cleaned to (key, value)."""

    def clean(self, value: Any) -> tuple[str, str] | None:
        text = super().clean(value)
        if not text:
            return None
        key, sep, label_value = text.partition("=")
        if not sep:
            raise forms.ValidationError("expected key=value")
        if not is_label_key(key):
            raise forms.ValidationError(f"expected {LABEL_KEY_EXPECTED} before '='")
        if not is_label_value(label_value):
            raise forms.ValidationError(f"expected {LABEL_VALUE_EXPECTED} after '='")
        return key, label_value


@extend_schema_field(OpenApiTypes.STR)
class LabelFilter(django_filters.Filter):
    """Agents whose label `key` is `value`; the key is data (a JSON key), never a lookup."""

    field_class = LabelField

    def filter(self, qs: QuerySet, value: tuple[str, str] | None) -> QuerySet:
        if not value:
            return qs
        key, label_value = value
        # KeyTransform takes the key as one JSON key (a parameter on PostgreSQL, a quoted path
        # on SQLite); `labels__<key>` would read "regex" or "contains" as a lookup.
        return qs.alias(label_match=KeyTransform(key, "labels")).filter(
            label_match=label_value)


class AgentFilterSet(django_filters.FilterSet):
    """Agents by lifecycle status, owner, one label, framework, or text in name/description
    (the registry's part of the agent list's filters; see agent_filterset)."""

    status = django_filters.ChoiceFilter(field_name="lifecycle", choices=Lifecycle.choices)
    owner = django_filters.CharFilter(field_name="owner__username", max_length=150)
    label = LabelFilter(max_length=400, help_text=LABEL_HELP)
    framework = django_filters.CharFilter(max_length=64)
    q = django_filters.CharFilter(method="search", max_length=200,
                                  help_text="text in the name or description")

    class Meta:
        model = Agent
        fields: list[str] = []

    def search(self, queryset: QuerySet[Agent], name: str, value: str) -> QuerySet[Agent]:
        return queryset.filter(Q(name__icontains=value) | Q(description__icontains=value))


_agent_filtersets: list[type[AgentFilterSet]] = []


def register_agent_filterset(filterset: type[AgentFilterSet]) -> None:
    """The agent list's filters: AgentFilterSet extended by the app that knows where each
    agent stands (reconciliation, from its AppConfig.ready; again on a repeat: the same
    class replaces itself)."""
    _agent_filtersets[:] = [filterset]


def agent_filterset() -> type[AgentFilterSet]:
    """The registered agent list filters (the API's and the agents page's)."""
    if not _agent_filtersets:
        raise ImproperlyConfigured("no agent list filters registered: is reconciliation in "
                                   "INSTALLED_APPS?")
    return _agent_filtersets[0]


class ProposalFilterSet(django_filters.FilterSet):
    """Proposals by state and agent name."""

    state = django_filters.ChoiceFilter(choices=VersionState.choices)
    agent = django_filters.CharFilter(field_name="agent__name", max_length=63)

    class Meta:
        model = DesiredStateVersion
        fields: list[str] = []
