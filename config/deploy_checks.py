"""Our own checks beside Django's: `manage.py check --deploy --database default` (and
`agentgov check`) run them. Settings that cannot work at all already stop the process when the
settings load (config/env.py); these catch what loads but should not run in production."""

from typing import Any

import redis
from django.conf import settings
from django.core import checks

from config import redis_connection


def hosts(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """A wildcard host lets any Host header through: links in notifications and CSRF origins
    would be the caller's to choose."""
    if "*" in settings.ALLOWED_HOSTS:
        return [checks.Error("ALLOWED_HOSTS contains '*'", hint="List the names the console is "
                             "served under.", id="config.E001")]
    return []


def witnesses(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Without a witness outside the database, nobody but the signer remembers signed heads."""
    if not settings.AUDIT_WITNESSES:
        return [checks.Warning("no audit witness is configured (AUDIT_WITNESSES)",
                               hint="Publish checkpoints to a directory or an HTTP witness you "
                                    "do not administer with the database.", id="config.W001")]
    return []


def redis_answers(app_configs: Any = None, databases: Any = None,
                  **kwargs: Any) -> list[checks.CheckMessage]:
    """Redis carries the work queue, the behaviour windows and live alerts."""
    if not databases:
        return []
    try:
        redis_connection.probe().ping()
    except redis.RedisError as error:
        return [checks.Error(f"Redis does not answer: {error}", hint="Check REDIS_URL (or "
                             "REDIS_SENTINELS).", id="config.E002")]
    return []
