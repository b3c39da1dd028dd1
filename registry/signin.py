"""Sign-in with a rate limit: after too many failures for one account or from one address,
further attempts get 429 until the window passes (counted in Redis, shared by every web
process). If Redis is down the limit is not enforced (sign-in stays available)."""

from typing import Any

import redis
from django.conf import settings
from django.contrib.auth import views as auth_views
from django.contrib.auth.signals import user_login_failed
from django.dispatch import receiver
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

WINDOW_SECONDS = 15 * 60
PER_ACCOUNT = 5
PER_ADDRESS = 30


def _redis() -> redis.Redis:
    return redis.Redis.from_url(settings.REDIS_URL, socket_timeout=1, socket_connect_timeout=1)


def _keys(request: HttpRequest, username: str) -> list[tuple[str, int]]:
    address = request.META.get("REMOTE_ADDR", "")
    return [(f"signin:fail:user:{username.lower()[:150]}", PER_ACCOUNT),
            (f"signin:fail:addr:{address}", PER_ADDRESS)]


def blocked(request: HttpRequest, username: str) -> bool:
    """True while this account or address has failed too often in the window."""
    try:
        client = _redis()
        counts = client.mget([key for key, _ in _keys(request, username)])
    except redis.RedisError:
        return False
    return any(int(count or 0) >= limit
               for count, (_, limit) in zip(counts, _keys(request, username), strict=True))


@receiver(user_login_failed, dispatch_uid="signin_rate_limit")
def _count_failure(sender: Any, credentials: dict, request: HttpRequest | None = None,
                   **kwargs: Any) -> None:
    if request is None:
        return
    try:
        pipe = _redis().pipeline()
        for key, _ in _keys(request, str(credentials.get("username", ""))):
            pipe.incr(key)
            pipe.expire(key, WINDOW_SECONDS)
        pipe.execute()
    except redis.RedisError:
        pass


class RateLimitedLoginView(auth_views.LoginView):
    """Django's sign-in page, refusing with 429 while the account or address is limited."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if blocked(request, request.POST.get("username", "")):
            return render(request, "registration/login.html",
                          {"form": self.get_form(), "rate_limited": True}, status=429)
        return super().post(request, *args, **kwargs)
