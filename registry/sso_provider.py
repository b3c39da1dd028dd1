"""Where the OpenID Connect provider's endpoints are: set explicitly, or read from its discovery
document on first use (never while settings are imported)."""

import threading
from typing import Any

import requests
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

# Setting name -> discovery document key.
_DISCOVERED = {
    "OIDC_OP_AUTHORIZATION_ENDPOINT": "authorization_endpoint",
    "OIDC_OP_TOKEN_ENDPOINT": "token_endpoint",
    "OIDC_OP_USER_ENDPOINT": "userinfo_endpoint",
    "OIDC_OP_JWKS_ENDPOINT": "jwks_uri",
}
_lock = threading.Lock()
_documents: dict[str, dict[str, Any]] = {}


def sso_enabled() -> bool:
    """True when single sign-on is configured."""
    return bool(getattr(settings, "OIDC_RP_CLIENT_ID", ""))


def discovery_url() -> str:
    """The provider's discovery document: OIDC_DISCOVERY_URL, or the issuer's well-known one."""
    if settings.OIDC_DISCOVERY_URL:
        return settings.OIDC_DISCOVERY_URL
    return settings.OIDC_ISSUER.rstrip("/") + "/.well-known/openid-configuration"


def _document() -> dict[str, Any]:
    url = discovery_url()
    with _lock:
        if url not in _documents:
            response = requests.get(url, timeout=settings.OIDC_TIMEOUT)
            response.raise_for_status()
            _documents[url] = response.json()
        return _documents[url]


def forget_discovery() -> None:
    """Read the discovery document again at next use (after the provider's keys moved)."""
    with _lock:
        _documents.clear()


def issuer() -> str:
    """The issuer every id token must name."""
    return settings.OIDC_ISSUER or _document()["issuer"]


def setting(name: str, *default: Any) -> Any:
    """A mozilla-django-oidc setting, an endpoint filled in from discovery when not set."""
    value = getattr(settings, name, None)
    if value is None and name in _DISCOVERED:
        value = _document().get(_DISCOVERED[name])
    if value is None:
        if default:
            return default[0]

        raise ImproperlyConfigured(f"Setting {name} not found")
    return value
