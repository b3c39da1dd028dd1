"""The API of toxic combinations: every person reads them, compliance staff write them, and
anyone may ask which paths the fleet has now (approved and observed)."""

from typing import Any

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from config.errors import NotAllowed
from config.permissions import IsPerson
from config.strict_input import ModelSerializer
from reconciliation import fleet_snapshot
from registry import actions
from registry.choices import Role, ToxicEffect
from registry.models import ToxicCombination
from registry.roles import has_role, sees_everything


class ToxicCombinationSerializer(ModelSerializer):
    """Two capabilities that must not meet."""

    effect = serializers.ChoiceField(choices=ToxicEffect.choices, default=ToxicEffect.DENY)
    created_by = serializers.CharField(source="created_by.username", read_only=True)

    class Meta:
        model = ToxicCombination
        fields = ["name", "description", "left", "right", "effect", "required_approvals",
                  "enabled", "created_by", "created_at", "updated_at"]
        read_only_fields = ["created_at", "updated_at"]


class ToxicCombinationViewSet(viewsets.ModelViewSet):
    """Toxic combinations and the paths the fleet has now (`GET .../paths`)."""

    serializer_class = ToxicCombinationSerializer
    permission_classes = [IsPerson]
    lookup_field = "name"
    queryset = ToxicCombination.objects.select_related("created_by").order_by("name")

    def _writer(self) -> None:
        if not has_role(self.request.user, Role.COMPLIANCE):
            raise NotAllowed("Only compliance staff manage toxic combinations.")

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        if request.method not in ("GET", "HEAD", "OPTIONS"):
            self._writer()  # before the body is validated: others learn nothing from it

    def perform_create(self, serializer: ToxicCombinationSerializer) -> None:
        serializer.instance = actions.create_toxic_combination(actor=self.request.user,
                                                               **serializer.validated_data)

    def perform_update(self, serializer: ToxicCombinationSerializer) -> None:
        changes = dict(serializer.validated_data)
        changes.pop("name", None)  # the name is the rule's identity
        serializer.instance = actions.update_toxic_combination(
            serializer.instance, actor=self.request.user, **changes)

    def perform_destroy(self, instance: ToxicCombination) -> None:
        actions.delete_toxic_combination(instance, actor=self.request.user)

    @extend_schema(responses=inline_serializer("ToxicPaths", {
        "approved": serializers.ListField(child=serializers.JSONField()),
        "approved_count": serializers.IntegerField(),
        "observed": serializers.ListField(child=serializers.JSONField(), required=False),
        "observed_count": serializers.IntegerField(required=False),
        "as_of": serializers.DateTimeField(help_text="when the workers found these paths"),
        "age_seconds": serializers.IntegerField(),
        "refreshing": serializers.BooleanField()}))
    @action(detail=False, methods=["get"])
    def paths(self, request: Request) -> Response:
        """The toxic paths in the approved fleet, agent -> agent (at most 50, beside their
        whole count); and for reviewers (who see what agents really run with) the paths in
        the observed one. Read from the fleet snapshot the workers keep."""
        snapshot = fleet_snapshot.current()
        paths = snapshot.toxic_paths
        body = {"approved": paths["approved"], "approved_count": paths["approved_count"]}
        if sees_everything(request.user):
            body |= {"observed": paths["observed"], "observed_count": paths["observed_count"]}
        return Response({**body, **fleet_snapshot.freshness(snapshot)})
