"""Registry models: API tokens for people (agents, manifests and versions build on these)."""

import hashlib

from django.conf import settings
from django.db import models
from django.utils import timezone


def hash_token_key(key: str) -> str:
    """Tokens are stored as their SHA-256; the key itself is shown once and never kept."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


class ApiToken(models.Model):
    """A bearer token (`Authorization: Token <key>`) acting as one person."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100, blank=True, default="")
    key_hash = models.CharField(max_length=64, unique=True)
    key_prefix = models.CharField(max_length=12)
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.key_prefix}… for {self.user}"

    def is_usable(self, now: timezone.datetime | None = None) -> bool:
        """Not revoked and not expired."""
        now = now or timezone.now()
        return self.revoked_at is None and (self.expires_at is None or self.expires_at > now)

    @property
    def audit_label(self) -> str:
        return f"token:{self.key_prefix}"
