"""Sign-ins, failures and sign-outs from every entry point (site, admin) reach the trail.

These are Django's authentication signals, not model signals: they fire once per attempt.
"""

from typing import Any

from django.contrib.auth.signals import user_logged_in, user_logged_out, user_login_failed
from django.dispatch import receiver

from registry import actions


@receiver(user_logged_in, dispatch_uid="audit_sign_in")
def _signed_in(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    actions.record_sign_in(user, request=request)


@receiver(user_login_failed, dispatch_uid="audit_sign_in_failed")
def _sign_in_failed(sender: Any, credentials: dict, request: Any = None, **kwargs: Any) -> None:
    actions.record_sign_in_failure(str(credentials.get("username", "")), request=request,
                                   reason=getattr(request, "sso_failure", ""))


@receiver(user_logged_out, dispatch_uid="audit_sign_out")
def _signed_out(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    if user is not None:
        actions.record_sign_out(user, request=request)
