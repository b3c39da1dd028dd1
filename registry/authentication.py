"""`Authorization: Token <key>` for people and scripts."""

from functools import cache
from typing import Any

from django.db import connection
from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions

from config.prepared import columns_of, instances_of, prepared_cursor
from registry.choices import Lifecycle
from registry.models import Agent, ApiToken, hash_token_key
from registry.principals import AgentPrincipal


class ApiTokenAuthentication(authentication.BaseAuthentication):
    """Look a token up by its hash; revoked or expired tokens are refused with 401."""

    keyword = "Token"

    def authenticate(self, request: Any) -> tuple[Any, ApiToken] | None:
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].lower() != self.keyword.lower().encode():
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("Authorization must be 'Token <key>'.")
        try:
            key = header[1].decode("ascii")
        except UnicodeDecodeError:
            raise exceptions.AuthenticationFailed("The token is not valid.") from None
        token = token_by_hash(hash_token_key(key))
        now = timezone.now()
        if token is None or not token.is_usable(now) or not token.user.is_active:
            raise exceptions.AuthenticationFailed("The token is not valid, revoked or expired.")
        # One write per minute at most: a busy agent must not turn every read into a write.
        if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:
            ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        if token.agent is not None:
            if token.agent.lifecycle == Lifecycle.RETIRED:
                raise exceptions.AuthenticationFailed("The token's agent is retired.")
            return AgentPrincipal(token.agent, token), token
        return token.user, token

    def authenticate_header(self, request: Any) -> str:
        return self.keyword


def token_by_hash(key_hash: str) -> ApiToken | None:
    """The token of that hash with its person and agent, read on the primary. On PostgreSQL
    one prepared statement (planned once per session): the ORM compiled and planned the
    same three-table read for every request, half of what authenticating one cost."""
    if connection.vendor != "postgresql":
        return ApiToken.objects.select_related("user", "agent").filter(
            key_hash=key_hash).first()
    cursor = prepared_cursor()
    cursor.execute(_token_statement(), [key_hash])
    row = cursor.fetchone()
    if row is None:
        return None
    token, user, agent = instances_of(row, [ApiToken, _person_model(), Agent])
    ApiToken.user.field.set_cached_value(token, user)
    ApiToken.agent.field.set_cached_value(token, agent)
    return token


def _person_model() -> Any:
    return ApiToken._meta.get_field("user").related_model


@cache
def _token_statement() -> str:
    quote = connection.ops.quote_name
    person = _person_model()
    return (f"SELECT {columns_of(ApiToken, 't')}, {columns_of(person, 'u')}, "
            f"{columns_of(Agent, 'a')} FROM {quote(ApiToken._meta.db_table)} t "
            f"JOIN {quote(person._meta.db_table)} u ON u.id = t.user_id "
            f"LEFT JOIN {quote(Agent._meta.db_table)} a ON a.id = t.agent_id "
            "WHERE t.key_hash = %s")


class ApiTokenScheme(OpenApiAuthenticationExtension):
    """Describes `Authorization: Token <key>` in the OpenAPI schema."""

    target_class = "registry.authentication.ApiTokenAuthentication"
    name = "tokenAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {"type": "apiKey", "in": "header", "name": "Authorization",
                "description": "`Token <key>`, from `manage.py api_token USER`"}
