"""`Authorization: Token <key>` for people and scripts."""

from typing import Any

from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions

from registry.choices import Lifecycle
from registry.models import ApiToken, hash_token_key
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
        token = (
            ApiToken.objects.select_related("user", "agent")
            .filter(key_hash=hash_token_key(key))
            .first()
        )
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


class ApiTokenScheme(OpenApiAuthenticationExtension):
    """Describes `Authorization: Token <key>` in the OpenAPI schema."""

    target_class = "registry.authentication.ApiTokenAuthentication"
    name = "tokenAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {"type": "apiKey", "in": "header", "name": "Authorization",
                "description": "`Token <key>`, from `manage.py api_token USER`"}
