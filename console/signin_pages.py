"""The sign-in redirect to the provider and its callback (mozilla-django-oidc's views), off
unless single sign-on is configured, and with every refused callback audited."""

import logging
from typing import Any

import requests
from django.conf import settings
from django.contrib import auth
from django.contrib.auth.views import LoginView
from django.core.exceptions import ImproperlyConfigured
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.generic import View
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from registry import sso_provider
from registry.actions.people import record_sign_in_failure

LOGGER = logging.getLogger(__name__)

# The name failed callbacks are counted under by the sign-in limit (with the client address) and
# audited as: a colon is never in a username, so no account shares it.
SSO_SIGNIN_NAME = "sso:oidc"


class SignInRequestView(OIDCAuthenticationRequestView):
    """Sends the browser to the provider with a fresh state, nonce and PKCE challenge."""

    get_settings = staticmethod(sso_provider.setting)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        View.__init__(self, *args, **kwargs)  # the provider is read in dispatch, not here

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not sso_provider.sso_enabled():
            raise Http404("Single sign-on is not configured.")
        try:
            self.OIDC_OP_AUTH_ENDPOINT = sso_provider.setting("OIDC_OP_AUTHORIZATION_ENDPOINT")
        except (requests.RequestException, ImproperlyConfigured, ValueError, KeyError) as error:
            LOGGER.warning("single sign-on provider unreachable: %s", error)
            return redirect(settings.LOGIN_REDIRECT_URL_FAILURE)
        self.OIDC_RP_CLIENT_ID = settings.OIDC_RP_CLIENT_ID
        return super().dispatch(request, *args, **kwargs)

    def get_extra_params(self, request: HttpRequest) -> dict[str, str]:
        params = dict(super().get_extra_params(request))
        redirect_uri = sso_provider.setting("OIDC_REDIRECT_URI", None)
        if redirect_uri:  # only the registered callback, whatever Host said
            params["redirect_uri"] = redirect_uri
        return params


class SignInCallbackView(OIDCAuthenticationCallbackView):
    """Where the provider sends the browser back; a refusal lands on the sign-in page."""

    get_settings = staticmethod(sso_provider.setting)

    def get(self, request: HttpRequest) -> HttpResponse:
        if not sso_provider.sso_enabled():
            raise Http404("Single sign-on is not configured.")
        states = request.session.get("oidc_states") or {}
        state = request.GET.get("state", "")
        entry = states.pop(state, None) if state else None
        request.session.modified = True  # a state is good for one callback, even a failed one
        if request.GET.get("error"):
            return self._failed(request, f"provider said {request.GET['error'][:100]}")
        if "code" not in request.GET or entry is None:
            return self._failed(request, "state unknown to this browser's session")
        request.session.save()
        self.user = auth.authenticate(request=request, username=SSO_SIGNIN_NAME,
                                      nonce=entry["nonce"],
                                      code_verifier=entry.get("code_verifier"))
        if self.user and self.user.is_active:
            return self.login_success()
        return self.login_failure()  # authenticate() sent user_login_failed

    def _failed(self, request: HttpRequest, reason: str) -> HttpResponse:
        """Audit a callback refused before anything reached the provider. It is not counted by
        the sign-in limit: any web page can make a browser fetch such a URL, and counting it
        would let that page lock the browser's address out of single sign-on. Nothing can be
        guessed through it either (callbacks that reach the token exchange are counted)."""
        record_sign_in_failure(SSO_SIGNIN_NAME, request=request, reason=reason)
        return self.login_failure()


class SignInPageView(LoginView):
    """The sign-in page: local accounts, and "Sign in with <provider>" when SSO is on."""

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        if sso_provider.sso_enabled():
            context["sso_provider_name"] = settings.OIDC_PROVIDER_NAME
            context["sso_failed"] = self.request.GET.get("sso") == "failed"
        return context
