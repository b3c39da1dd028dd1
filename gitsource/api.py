"""The API of Git sources: people list them, owners add their own (admin anyone's), people
register the SSH keys they sign commits with, anyone signed in reads an agent's sync status,
and a Git host's webhook (HMAC-signed) asks for a poll."""

import hashlib
import hmac
from typing import Any

from django.contrib.auth.models import User
from django.utils import timezone
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from config.errors import DomainError, Invalid, NotAllowed, NotFound
from config.parsers import SafeJSONParser
from config.permissions import IsPerson
from config.strict_input import Serializer
from gitsource import actions
from gitsource.choices import PolicyState, SyncState
from gitsource.models import GitSource, PolicyChange, SigningKey
from gitsource.policy_tests import MAX_BYTES, MAX_FILES, PolicyError, run_cases
from gitsource.policy_whatif import policy_what_if
from gitsource.sync_status import for_agent
from registry.choices import Role
from registry.connector_secrets import secret_value
from registry.models import Agent
from registry.roles import has_role, sees_everything


class Unauthenticated(DomainError):
    """The webhook's signature does not match the source's secret."""

    status, code = 401, "bad_signature"


class GitSourceSerializer(Serializer):
    """`POST /git/sources`: a repository branch and folder of manifests."""

    name = serializers.SlugField(max_length=63)
    url = serializers.CharField(max_length=500)
    branch = serializers.CharField(max_length=200, default="main")
    folder = serializers.CharField(max_length=300, default="", allow_blank=True)
    policy_folder = serializers.CharField(max_length=300, default="", allow_blank=True)
    owner = serializers.CharField(max_length=150, required=False)
    team = serializers.CharField(max_length=100, default="", allow_blank=True)
    require_signed = serializers.BooleanField(default=False)
    secret_env = serializers.CharField(max_length=100, default="", allow_blank=True)
    webhook_secret_env = serializers.CharField(max_length=100, default="", allow_blank=True)
    status_url = serializers.CharField(max_length=500, default="", allow_blank=True)
    status_secret_env = serializers.CharField(max_length=100, default="", allow_blank=True)
    commit_url = serializers.CharField(max_length=500, default="", allow_blank=True)


SOURCE_FIELDS = {"name": serializers.CharField(), "url": serializers.CharField(),
                 "branch": serializers.CharField(), "folder": serializers.CharField(),
                 "policy_folder": serializers.CharField(),
                 "owner": serializers.CharField(), "team": serializers.CharField(),
                 "require_signed": serializers.BooleanField(),
                 "enabled": serializers.BooleanField(),
                 "status_url": serializers.CharField(), "commit_url": serializers.CharField(),
                 "head": serializers.CharField(allow_null=True),
                 "fetched_at": serializers.DateTimeField(allow_null=True),
                 "fetch_error": serializers.CharField(allow_null=True),
                 "fetch_failed_at": serializers.DateTimeField(allow_null=True)}
SOURCE = inline_serializer("GitSource", SOURCE_FIELDS)
SOURCES = inline_serializer("GitSourceList", {"results": serializers.ListField(
    child=serializers.DictField())})
KEY = inline_serializer("SigningKey", {"id": serializers.IntegerField(),
                                       "person": serializers.CharField(),
                                       "fingerprint": serializers.CharField(),
                                       "created_at": serializers.DateTimeField()})


def _owned_source(name: str, actor: Any) -> GitSource:
    source = GitSource.objects.select_related("owner").filter(name=name).first()
    if source is None:
        raise NotFound(f"No Git source named {name!r}.")
    if source.owner_id != actor.pk and not has_role(actor, Role.ADMIN):
        raise NotAllowed(f"Git source {name} is {source.owner.username}'s.")
    return source


class GitSourcesView(APIView):
    """`GET /api/v1/git/sources` (people), `POST` (owners: their own; admin: anyone's)."""

    parser_classes = [SafeJSONParser]
    permission_classes = [IsPerson]

    @extend_schema(responses={200: SOURCES})
    def get(self, request: Request) -> Response:
        sources = GitSource.objects.select_related("owner").order_by("name")
        return Response({"results": [s.to_dict() for s in sources]})

    @extend_schema(request=GitSourceSerializer, responses={201: SOURCE})
    def post(self, request: Request) -> Response:
        if not (has_role(request.user, Role.OWNER) or has_role(request.user, Role.ADMIN)):
            raise NotAllowed("Only owners and admins add Git sources.")  # before the body
        body = GitSourceSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        fields = dict(body.validated_data)
        owner = None
        if "owner" in fields:
            username = fields.pop("owner")
            owner = User.objects.filter(username=username, is_active=True).first()
            if owner is None:
                raise NotFound(f"No person named {username!r}.")
        source = actions.create_source(actor=request.user, owner=owner, **fields)
        return Response(source.to_dict(), status=status.HTTP_201_CREATED)


class GitSourcePollView(APIView):
    """`POST /api/v1/git/sources/{name}/poll`: its owner (or admin) fetches it now."""

    permission_classes = [IsPerson]

    @extend_schema(request=None, responses={202: SOURCE})
    def post(self, request: Request, name: str) -> Response:
        source = _owned_source(name, request.user)
        actions.enqueue_poll(source.pk)
        return Response(source.to_dict(), status=status.HTTP_202_ACCEPTED)


class GitWebhookView(APIView):
    """`POST /api/v1/git/sources/{name}/webhook`: a push on the host; the body's HMAC-SHA256
    under the source's webhook secret in `X-Hub-Signature-256: sha256=<hex>` (as GitHub and
    Gitea send it). A good signature queues a poll; the body is never trusted for more."""

    authentication_classes: list = []
    permission_classes = [AllowAny]

    @extend_schema(request=None, responses={202: inline_serializer(
        "GitWebhookQueued", {"queued": serializers.BooleanField()})})
    def post(self, request: Request, name: str) -> Response:
        body = request.body
        source = GitSource.objects.filter(name=name, enabled=True).first()
        secret = (secret_value(source.webhook_secret_env)
                  if source is not None and source.webhook_secret_env else None)
        given = request.headers.get("X-Hub-Signature-256", "")
        if secret is None:  # no such source and no webhook secret answer alike
            raise Unauthenticated("This source takes no webhooks, or there is no such source.")
        expected = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
        if not hmac.compare_digest(given.encode(), expected.encode()):
            raise Unauthenticated("The webhook signature does not match.")
        actions.enqueue_poll(source.pk)
        return Response({"queued": True}, status=status.HTTP_202_ACCEPTED)


class SigningKeySerializer(Serializer):
    """`POST /git/signing-keys`: an OpenSSH public key you sign commits with."""

    public_key = serializers.CharField(max_length=2000)


def _key(key: SigningKey) -> dict[str, Any]:
    return {"id": key.pk, "person": key.person.username, "fingerprint": key.fingerprint,
            "created_at": key.created_at.isoformat()}


class SigningKeysView(APIView):
    """`GET /api/v1/git/signing-keys` (your own; admin: everyone's), `POST` (yours)."""

    parser_classes = [SafeJSONParser]
    permission_classes = [IsPerson]

    @extend_schema(responses={200: inline_serializer("SigningKeys", {
        "results": serializers.ListField(child=serializers.DictField())})})
    def get(self, request: Request) -> Response:
        keys = SigningKey.objects.select_related("person").order_by("pk")
        if not has_role(request.user, Role.ADMIN):
            keys = keys.filter(person=request.user)
        return Response({"results": [_key(k) for k in keys]})

    @extend_schema(request=SigningKeySerializer, responses={201: KEY})
    def post(self, request: Request) -> Response:
        body = SigningKeySerializer(data=request.data)
        body.is_valid(raise_exception=True)
        key = actions.register_signing_key(actor=request.user,
                                           public_key=body.validated_data["public_key"])
        return Response(_key(key), status=status.HTTP_201_CREATED)


class AgentGitStatusView(APIView):
    """`GET /api/v1/agents/{name}/git`: how the agent stands against its Git branch."""

    permission_classes = [IsPerson]

    @extend_schema(responses={200: inline_serializer("GitSyncStatus", {
        "managed": serializers.BooleanField(),
        "sync": serializers.ChoiceField(choices=SyncState.choices, allow_null=True),
        "message": serializers.CharField()})})
    def get(self, request: Request, name: str) -> Response:
        agent = (Agent.objects.select_related("active_version", "git__source")
                 .filter(name=name).first())
        if agent is None:
            raise NotFound(f"No agent named {name!r}.")
        found = for_agent(agent)
        if found is None:
            return Response({"managed": False, "sync": None, "message": (
                f"{name} is not managed from Git")})
        return Response(found)


POLICY_CHANGE = inline_serializer("PolicyChange", {
    "id": serializers.IntegerField(), "source": serializers.CharField(),
    "commit": serializers.CharField(), "state": serializers.ChoiceField(
        choices=PolicyState.choices), "proposed_by": serializers.CharField(allow_null=True),
    "refused": serializers.CharField(allow_null=True),
    "failing_cases": serializers.ListField(child=serializers.DictField()),
    "plan": serializers.ListField(child=serializers.DictField()),
    "what_if": serializers.DictField(allow_null=True)})


def _policy_change(pk: int) -> PolicyChange:
    change = (PolicyChange.objects.select_related("source", "proposed_by", "decided_by")
              .filter(pk=pk).first())
    if change is None:
        raise NotFound(f"No policy change {pk}.")
    return change


def policy_change_body(change: PolicyChange, user: Any) -> dict[str, Any]:
    """A policy change as served, with its what-if while it waits for a decision (to those
    who review every agent: it names agents across owners)."""
    shown = change.state == PolicyState.PENDING and sees_everything(user)
    return {**change.to_dict(), "what_if": policy_what_if(change) if shown else None}


class PolicyChangesView(APIView):
    """`GET /api/v1/git/policy-changes`: policy commits, newest first (`?state=pending`)."""

    permission_classes = [IsPerson]

    @extend_schema(operation_id="git_policy_changes_list", responses={
        200: inline_serializer("PolicyChanges", {
            "results": serializers.ListField(child=serializers.DictField())})})
    def get(self, request: Request) -> Response:
        changes = PolicyChange.objects.select_related("source", "proposed_by", "decided_by")
        state = request.query_params.get("state")
        if state:
            if state not in PolicyState.values:
                raise Invalid(f"state: expected one of {', '.join(PolicyState.values)}",
                              details=[{"pointer": "/state", "message": "unknown state"}])
            changes = changes.filter(state=state)
        return Response({"results": [c.to_dict() for c in changes.order_by("-pk")[:200]]})


class PolicyChangeView(APIView):
    """`GET /api/v1/git/policy-changes/{id}`: one policy commit, its plan, test cases and (while
    pending) what it would have flagged over the last week."""

    permission_classes = [IsPerson]

    @extend_schema(responses={200: POLICY_CHANGE})
    def get(self, request: Request, pk: int) -> Response:
        return Response(policy_change_body(_policy_change(pk), request.user))


class PolicyDecisionSerializer(Serializer):
    """`POST /git/policy-changes/{id}/approve|reject`: the decision's comment."""

    comment = serializers.CharField(max_length=2000, default="", allow_blank=True)


class PolicyChangeDecisionView(APIView):
    """`POST /api/v1/git/policy-changes/{id}/approve` and `/reject`: a compliance person other
    than its committer decides; approval applies it."""

    parser_classes = [SafeJSONParser]
    permission_classes = [IsPerson]
    decision = "approve"

    @extend_schema(request=PolicyDecisionSerializer, responses={200: POLICY_CHANGE})
    def post(self, request: Request, pk: int) -> Response:
        if not has_role(request.user, Role.COMPLIANCE):
            raise NotAllowed("Only compliance staff decide on policy changes.")
        body = PolicyDecisionSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        decide = (actions.approve_policy_change if self.decision == "approve"
                  else actions.reject_policy_change)
        change = decide(pk, actor=request.user, comment=body.validated_data["comment"])
        return Response(policy_change_body(change, request.user))


class PolicyTestsSerializer(Serializer):
    """`POST /policy-tests`: a policy folder's files, path (relative) -> text."""

    files = serializers.DictField(child=serializers.CharField(
        max_length=MAX_BYTES, allow_blank=True, trim_whitespace=False),
        allow_empty=False)

    def validate_files(self, value: dict[str, str]) -> dict[str, str]:
        if len(value) > MAX_FILES:
            raise serializers.ValidationError(f"at most {MAX_FILES} files")
        return value


class PolicyTestsView(APIView):
    """`POST /api/v1/policy-tests`: run a folder's PolicyTest cases with the evaluator a
    policy commit meets (what `manage.py policy_test` runs); nothing is stored or changed."""

    parser_classes = [SafeJSONParser]
    permission_classes = [IsPerson]

    @extend_schema(request=PolicyTestsSerializer, responses={200: inline_serializer(
        "PolicyTestResults", {"results": serializers.ListField(child=serializers.DictField()),
                              "passed": serializers.IntegerField(),
                              "failed": serializers.IntegerField()})})
    def post(self, request: Request) -> Response:
        body = PolicyTestsSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        files = {str(k): v for k, v in body.validated_data["files"].items()}
        try:
            results = run_cases(files, timezone.now())
        except PolicyError as error:
            raise Invalid(str(error), code="invalid_policy", details=[
                {"pointer": "/files", "message": str(error)}]) from None
        if not results:
            raise Invalid("no PolicyTest cases among the files", code="invalid_policy",
                          details=[{"pointer": "/files", "message": "no test cases"}])
        failed = sum(1 for r in results if not r.ok)
        return Response({"results": [{**r.to_dict(), "line": r.line} for r in results],
                         "passed": len(results) - failed, "failed": failed})
