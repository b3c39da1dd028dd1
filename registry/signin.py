"""Sign-in with a rate limit: after too many failures for one account or from one address,
further attempts get 429 until the window passes. Failures are counted in Redis, shared by
every web process. If Redis is down the limit still holds: every failure is also in the audit
trail (registry/signin_audit.py), so the same limits are counted there instead, in the one
database every web process shares. Brute force stays limited; nobody else is locked out."""

from datetime import timedelta
from typing import Any

import redis
from django.conf import settings
from django.contrib.auth import views as auth_views
from django.contrib.auth.signals import user_login_failed
from django.dispatch import receiver
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from audit.choices import AuditAction
from audit.models import AuditEntry

WINDOW_SECONDS = 15 * 60
PER_ACCOUNT = 5
PER_ADDRESS = 30


def _redis() -> redis.Redis:
    return redis.Redis.from_url(settings.REDIS_URL, socket_timeout=1, socket_connect_timeout=1)


def _address(request: HttpRequest) -> str:
    return request.META.get("REMOTE_ADDR", "")


def _account(username: str) -> str:
    return username[:150]  # as the audit row's target names it


def _keys(request: HttpRequest, username: str) -> list[tuple[str, int]]:
    return [(f"signin:fail:user:{_account(username).lower()}", PER_ACCOUNT),
            (f"signin:fail:addr:{_address(request)}", PER_ADDRESS)]


def _counted_in_redis(request: HttpRequest, username: str) -> list[int]:
    client = _redis()
    try:
        counts = client.mget([key for key, _ in _keys(request, username)])
    finally:
        client.close()
    return [int(count or 0) for count in counts]


def _counted_in_trail(request: HttpRequest, username: str) -> list[int]:
    """The failures of the window as the audit trail recorded them (Redis unavailable)."""
    failures = AuditEntry.objects.filter(
        action=AuditAction.USER_SIGN_IN_FAILED,
        at__gte=timezone.now() - timedelta(seconds=WINDOW_SECONDS))
    return [failures.filter(target__iexact=f"user:{_account(username)}").count(),
            failures.filter(after__ip=_address(request)).count()]


def blocked(request: HttpRequest, username: str) -> bool:
    """True while this account or address has failed too often in the window."""
    try:
        counts = _counted_in_redis(request, username)
    except redis.RedisError:
        counts = _counted_in_trail(request, username)
    return any(count >= limit
               for count, (_, limit) in zip(counts, _keys(request, username), strict=True))


@receiver(user_login_failed, dispatch_uid="signin_rate_limit")
def _count_failure(sender: Any, credentials: dict, request: HttpRequest | None = None,
                   **kwargs: Any) -> None:
    if request is None:
        return
    client = _redis()
    try:
        pipe = client.pipeline()
        for key, _ in _keys(request, str(credentials.get("username", ""))):
            pipe.incr(key)
            pipe.expire(key, WINDOW_SECONDS)
        pipe.execute()
    except redis.RedisError:
        pass  # the failure's audit row is what the limit counts until Redis is back
    finally:
        client.close()


class RateLimitedLoginView(auth_views.LoginView):
    """Django's sign-in page, refusing with 429 while the account or address is limited."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if blocked(request, request.POST.get("username", "")):
            return render(request, "registration/login.html",
                          {"form": self.get_form(), "rate_limited": True}, status=429)
        return super().post(request, *args, **kwargs)
