"""The authentication backend for the provider's callback (mozilla-django-oidc), made strict:
the id token must be signed by the provider's key, unexpired, for this client, from this issuer,
with the nonce this browser was given; the account is found by (issuer, sub) only."""

import logging
from typing import Any

import jwt
import requests
from django.conf import settings
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.models import User
from django.core.exceptions import ImproperlyConfigured, SuspiciousOperation
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from registry import sso_provider
from registry.actions.sso import sign_in_from_provider

LOGGER = logging.getLogger(__name__)
CLOCK_SKEW_SECONDS = 30


def note_failure(request: Any, reason: str) -> None:
    """Keep why a sign-in failed on the request, for the audit row of user_login_failed."""
    if request is not None:
        request.sso_failure = reason[:200]


class SingleSignOnBackend(OIDCAuthenticationBackend):
    """Signs in the person the provider vouches for; every failure is None, so Django sends
    user_login_failed and both the sign-in limit and the audit trail count it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Django builds every backend for every authenticate(), password sign-ins included:
        # nothing here may read the provider (it may be down); authenticate() does.
        pass

    @staticmethod
    def get_settings(attr: str, *args: Any) -> Any:
        if attr == "OIDC_OP_USER_ENDPOINT" and not args:
            args = ("",)
        return sso_provider.setting(attr, *args)

    def authenticate(self, request: Any, **kwargs: Any) -> User | None:
        kwargs.pop("username", None)  # the sign-in limit's key, not a claim
        if not sso_provider.sso_enabled() or request is None or "nonce" not in kwargs:
            return None  # not the provider's callback (console/signin_pages.py), e.g. a password
        try:
            super().__init__()  # reads the endpoints, from discovery when not set
            user = super().authenticate(request, **kwargs)
        except (SuspiciousOperation, ImproperlyConfigured, jwt.PyJWTError,
                requests.RequestException, KeyError, ValueError, TypeError) as error:
            LOGGER.warning("single sign-on refused: %s", error)
            note_failure(request, str(error) or type(error).__name__)
            return None
        if user is not None and not user.is_active:
            note_failure(request, f"account {user.username} is deactivated")
            return None
        return user

    def get_token(self, payload: dict[str, Any]) -> dict[str, Any]:
        if settings.OIDC_REDIRECT_URI:  # only the registered callback, whatever Host said
            payload["redirect_uri"] = settings.OIDC_REDIRECT_URI
        return super().get_token(payload)

    def _verify_jws(self, payload: str, key: Any) -> dict[str, Any]:
        header = jwt.get_unverified_header(payload)
        if header.get("alg") != self.OIDC_RP_SIGN_ALGO:
            raise SuspiciousOperation(f"id token algorithm {header.get('alg')!r} is not "
                                      f"{self.OIDC_RP_SIGN_ALGO!r}")
        try:
            return jwt.decode(
                payload, key, algorithms=[self.OIDC_RP_SIGN_ALGO],
                audience=self.OIDC_RP_CLIENT_ID, issuer=sso_provider.issuer(),
                leeway=CLOCK_SKEW_SECONDS,
                options={"require": ["exp", "iat", "iss", "aud", "sub"]},
            )
        except jwt.PyJWTError as error:
            raise SuspiciousOperation(f"id token refused: {error}") from None

    def get_userinfo(self, access_token: str, id_token: str,
                     payload: dict[str, Any]) -> dict[str, Any]:
        """The verified id token's claims, with the userinfo endpoint's when there is one; the
        id token wins, and userinfo about another subject is refused."""
        if not self.OIDC_OP_USER_ENDPOINT:
            return dict(payload)
        info = super().get_userinfo(access_token, id_token, payload)
        if str(info.get("sub")) != str(payload["sub"]):
            raise SuspiciousOperation("userinfo is about another subject than the id token")
        return {**info, **payload}

    def verify_claims(self, claims: dict[str, Any]) -> bool:
        return 0 < len(str(claims.get("sub") or "")) <= 255

    def get_or_create_user(self, access_token: str, id_token: str,
                           payload: dict[str, Any]) -> User | None:
        claims = self.get_userinfo(access_token, id_token, payload)
        if not self.verify_claims(claims):
            note_failure(self.request, "the id token names no usable subject")
            raise SuspiciousOperation("the id token names no usable subject")
        return sign_in_from_provider(claims, issuer=sso_provider.issuer(),
                                     groups_claim=settings.OIDC_GROUPS_CLAIM,
                                     role_map=settings.OIDC_ROLE_MAP)

    def get_user(self, user_id: Any) -> User | None:
        return ModelBackend.get_user(self, user_id)  # an inactive account's session ends
