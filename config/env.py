"""Typed readers for environment settings that fail loudly on bad values."""

import os
import re
from urllib.parse import urlparse

from config.outbound import parse_entry
from config.permission_sources import DeclarationError, parse_sources
from config.roles import Role


class SettingError(ValueError):
    """An environment variable holds a value the product cannot use."""


def _raw(name: str) -> str | None:
    value = os.environ.get(name)
    return None if value is None or value.strip() == "" else value.strip()


def env_str(name: str, default: str | None = None) -> str | None:
    """A string, or the default when unset or empty."""
    value = _raw(name)
    return default if value is None else value


BOOLEAN_WORDS = "true/false, 1/0, yes/no, on/off"


def boolean_word(value: str) -> bool | None:
    """True or False for true/false, yes/no, on/off, 1/0 in any case; None for anything else
    (a setting's value, a query's `?dry_run=`)."""
    lowered = value.lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off"}:
        return False
    return None


def env_bool(name: str, default: bool) -> bool:
    """true/false, yes/no, on/off, 1/0; anything else is an error."""
    value = _raw(name)
    if value is None:
        return default
    if (read := boolean_word(value)) is not None:
        return read
    raise SettingError(f"{name} must be a boolean ({BOOLEAN_WORDS}); got {value!r}")


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    """A whole number, optionally bounded below."""
    value = _raw(name)
    if value is None:
        return default
    try:
        number = int(value)
    except ValueError:
        raise SettingError(f"{name} must be an integer; got {value!r}") from None
    if minimum is not None and number < minimum:
        raise SettingError(f"{name} must be at least {minimum}; got {number}")
    return number


def env_list(name: str, default: list[str]) -> list[str]:
    """A comma-separated list."""
    value = _raw(name)
    if value is None:
        return list(default)
    return [item.strip() for item in value.split(",") if item.strip()]


def env_role_map(name: str) -> dict[str, str]:
    """`group=role,group=role`: which identity-provider group grants which role."""
    entries = env_list(name, [])
    if not entries:
        return {}
    mapping: dict[str, str] = {}
    for entry in entries:
        group, sep, role = (part.strip() for part in entry.rpartition("="))
        if not sep or not group or role not in Role.values:
            roles = ", ".join(Role.values)
            raise SettingError(f"{name}: {entry!r} must be group=role with a role of {roles}")
        mapping[group] = role
    return mapping


def env_url(name: str, schemes: set[str]) -> str | None:
    """A URL whose scheme is one of `schemes`, or None when unset."""
    value = _raw(name)
    if value is None:
        return None
    parsed = urlparse(value)
    if parsed.scheme not in schemes:
        expected = ", ".join(sorted(schemes))
        raise SettingError(f"{name} must be a URL with scheme {expected}; got {value!r}")
    return value


def env_allow_list(name: str) -> list[str]:
    """Outbound `host[:port]` entries (config/outbound.py); a bad entry is an error."""
    entries = env_list(name, [])
    for entry in entries:
        try:
            parse_entry(entry)
        except ValueError as error:
            raise SettingError(f"{name}: {error}") from None
    return entries


# The control plane's own secrets: never a connector secret, whatever an admin lists.
OWN_SECRETS = frozenset({"SECRET_KEY", "AUDIT_SIGNING_KEY", "DATABASE_URL", "REDIS_URL",
                         "DECISION_WEBHOOK_SECRET"})
OWN_PREFIXES = ("AUDIT_", "DJANGO_")  # the audit trail's keys, present and future


def env_connector_secrets(name: str) -> list[str]:
    """Names of platform secrets (environment variable names); the control plane's own secrets
    and anything that is not a variable name are errors."""
    names = env_list(name, [])
    for secret in names:
        if not re.fullmatch(r"[A-Z_][A-Z0-9_]*", secret):
            raise SettingError(f"{name}: {secret!r} is not an environment variable name")
        if (secret in OWN_SECRETS or secret.removesuffix("_FILE") in OWN_SECRETS
                or secret.startswith(OWN_PREFIXES)):
            raise SettingError(f"{name}: {secret} is the control plane's own secret")
    return names


def env_permission_sources(name: str, secrets: list[str]) -> dict:
    """The declared permission sources (config/permission_sources.py), each naming one of
    `secrets`."""
    try:
        return parse_sources(_raw(name), secrets)
    except DeclarationError as error:
        raise SettingError(str(error)) from None


SECRET_MIN_LENGTH = 32
SECRET_MIN_DISTINCT = 10
SECRET_HINT = "python -c 'import secrets; print(secrets.token_urlsafe(48))'"


def check_secret(name: str, value: str, *, min_length: int = SECRET_MIN_LENGTH) -> str:
    """`value` if it is strong enough to be a secret; otherwise an error that names the rule
    (never the value) and how to make a good one."""
    problems = []
    if len(value) < min_length:
        problems.append(f"at least {min_length} characters (got {len(value)})")
    distinct = len(set(value))
    if distinct < SECRET_MIN_DISTINCT:
        problems.append(f"at least {SECRET_MIN_DISTINCT} different characters (got {distinct})")
    if value.lower().startswith(("django-insecure", "changeme", "change-me")):
        problems.append("not a placeholder")
    if problems:
        raise SettingError(f"{name} is too weak: it needs {' and '.join(problems)}; "
                           f"make one with {SECRET_HINT}")
    return value


def env_secret(name: str, default: str | None = None, *,
               min_length: int = SECRET_MIN_LENGTH) -> str | None:
    """A secret from the environment, refused when weak; the default when unset."""
    value = _raw(name)
    return default if value is None else check_secret(name, value, min_length=min_length)
