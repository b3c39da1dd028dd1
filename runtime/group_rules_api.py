"""Group rules in the API: `/api/v1/group-rules` (every person reads, compliance writes) and
the what-if over the last week (`POST /api/v1/group-rules/what-if` for an unsaved rule,
`GET /api/v1/group-rules/{name}/what-if` for a saved one)."""

from typing import Any

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, viewsets
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from config.errors import Invalid, NotAllowed, NotFound
from config.permissions import IsPerson
from config.strict_input import ModelSerializer
from registry.choices import Role
from registry.roles import HasRole, has_role
from runtime.actions import group_rules as actions
from runtime.group_rules import EFFECTS, MEASURES, GroupRuleSpec, validate
from runtime.models import GroupRule
from runtime.whatif import what_if


class GroupRuleSerializer(ModelSerializer):
    """A rule over a group of agents."""

    measure = serializers.ChoiceField(choices=MEASURES)
    effect = serializers.ChoiceField(choices=EFFECTS, required=False)
    selector = serializers.JSONField(required=False)
    match = serializers.JSONField(required=False)
    created_by = serializers.CharField(source="created_by.username", read_only=True)

    class Meta:
        model = GroupRule
        fields = ["name", "description", "selector", "match", "measure", "limit", "per",
                  "per_record", "effect", "required_approvals", "across_owners", "enabled",
                  "revision",
                  "created_by", "created_at", "updated_at"]
        read_only_fields = ["revision", "created_at", "updated_at"]


WhatIf = inline_serializer("GroupRuleWhatIf", {
    "days": serializers.IntegerField(), "since": serializers.DateTimeField(),
    "events": serializers.IntegerField(help_text="events replayed"),
    "capped": serializers.BooleanField(), "cap": serializers.IntegerField(),
    "agents_covered": serializers.ListField(child=serializers.CharField()),
    "breaches": serializers.IntegerField(), "escalations": serializers.IntegerField(),
    "findings": serializers.IntegerField(),
    "agents": serializers.ListField(child=serializers.DictField()),
    "examples": serializers.ListField(child=serializers.DictField())})


class GroupRuleViewSet(viewsets.ModelViewSet):
    """Group rules: every person reads them; compliance staff write them."""

    serializer_class = GroupRuleSerializer
    permission_classes = [IsPerson]
    lookup_field = "name"
    queryset = GroupRule.objects.select_related("created_by").order_by("name")

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        if request.method not in ("GET", "HEAD", "OPTIONS") and not has_role(
                request.user, Role.COMPLIANCE):
            raise NotAllowed("Only compliance staff manage group rules.")

    def perform_create(self, serializer: GroupRuleSerializer) -> None:
        serializer.instance = actions.create_group_rule(actor=self.request.user,
                                                        **serializer.validated_data)

    def perform_update(self, serializer: GroupRuleSerializer) -> None:
        changes = dict(serializer.validated_data)
        changes.pop("name", None)  # the name is the rule's identity
        serializer.instance = actions.update_group_rule(serializer.instance,
                                                        actor=self.request.user, **changes)

    def perform_destroy(self, instance: GroupRule) -> None:
        actions.delete_group_rule(instance, actor=self.request.user)


def _spec(data: dict[str, Any], name: str = "what-if") -> GroupRuleSpec:
    errors = validate(data)
    if errors:
        raise Invalid(f"The group rule is not valid: {errors[0]['pointer']} "
                      f"{errors[0]['message']}.", details=errors)
    return GroupRuleSpec(id=0, name=name, selector=data.get("selector") or {},
                         match=data.get("match") or {}, measure=data["measure"],
                         limit=data["limit"], per=data["per"],
                         per_record=bool(data.get("per_record")),
                         effect=data.get("effect", "escalate"))


class GroupRuleWhatIfView(APIView):
    """`POST /api/v1/group-rules/what-if`: an unsaved rule over the fleet's last week."""

    permission_classes = [IsPerson, HasRole]
    required_roles = (Role.COMPLIANCE,)

    @extend_schema(request=GroupRuleSerializer, responses=WhatIf)
    def post(self, request: Request) -> Response:
        data = request.data if isinstance(request.data, dict) else None
        if data is None:
            raise Invalid("Expected a group rule object.",
                          details=[{"pointer": "", "message": "expected an object"}])
        # read as saving it would read it: the answer is for the rule that would be saved
        GroupRuleSerializer().refuse_unreadable(data)
        return Response(what_if(_spec(data)))


class SavedGroupRuleWhatIfView(APIView):
    """`GET /api/v1/group-rules/{name}/what-if`: a saved rule over the fleet's last week."""

    permission_classes = [IsPerson, HasRole]
    required_roles = (Role.COMPLIANCE,)

    @extend_schema(responses=WhatIf)
    def get(self, request: Request, name: str) -> Response:
        rule = GroupRule.objects.filter(name=name).first()
        if rule is None:
            raise NotFound(f"No group rule {name!r}.")
        return Response(what_if(rule.to_spec()))
