"""The filters shared by the audit API and the explorer page."""

from django.db.models import QuerySet
from rest_framework import serializers

from config.strict_input import QuerySerializer


class AuditFilterSerializer(QuerySerializer):
    """Query parameters: agent, actor, action, since, until (ISO 8601), before (seq)."""

    agent = serializers.CharField(required=False, max_length=63, allow_blank=True)
    actor = serializers.CharField(required=False, max_length=200, allow_blank=True)
    action = serializers.CharField(required=False, max_length=64, allow_blank=True)
    since = serializers.DateTimeField(required=False, allow_null=True)
    until = serializers.DateTimeField(required=False, allow_null=True)
    before = serializers.IntegerField(required=False, min_value=1, allow_null=True)

    def validate(self, attrs: dict) -> dict:
        since, until = attrs.get("since"), attrs.get("until")
        if since and until and since > until:
            raise serializers.ValidationError({"since": "must not be after 'until'."})
        return attrs


def filter_entries(queryset: QuerySet, params: dict) -> QuerySet:
    """Apply validated filters; every filter is served by an index on (field, seq) or at. Queued
    entries (AuditPendingEntry) take the same filters but `before`, which is a seq."""
    if params.get("agent"):
        queryset = queryset.filter(agent=params["agent"])
    if params.get("actor"):
        queryset = queryset.filter(actor=params["actor"])
    if params.get("action"):
        queryset = queryset.filter(action=params["action"])
    if params.get("since"):
        queryset = queryset.filter(at__gte=params["since"])
    if params.get("until"):
        queryset = queryset.filter(at__lte=params["until"])
    if params.get("before"):
        queryset = queryset.filter(seq__lt=params["before"])
    return queryset
