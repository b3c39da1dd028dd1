"""The agent list's filters with the loop's two words added: `health` (where the agent stands
as last reconciled) and `sync` (converged on its current generation or not). Registered with
the registry's list (registry/filters.py) from ReconciliationConfig.ready; the API's agent
list and the agents page both filter through it."""

import django_filters
from django.db.models import QuerySet

from reconciliation.choices import Health
from reconciliation.sync import Sync, health_filter, sync_filter
from registry.filters import AgentFilterSet
from registry.models import Agent


class AgentStateFilterSet(AgentFilterSet):
    """The registry's agent filters, and health and sync as the loop last left the agent."""

    health = django_filters.ChoiceFilter(choices=Health.choices, method="by_health",
                                         help_text="where it stands as last reconciled")
    sync = django_filters.ChoiceFilter(choices=Sync.choices, method="by_sync",
                                       help_text="converged on its current generation or not")

    def by_health(self, queryset: QuerySet[Agent], name: str, value: str) -> QuerySet[Agent]:
        return queryset.filter(health_filter(value))

    def by_sync(self, queryset: QuerySet[Agent], name: str, value: str) -> QuerySet[Agent]:
        return queryset.filter(sync_filter(value))
