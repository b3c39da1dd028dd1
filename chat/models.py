"""Chat accounts linked to people, the codes that link them, and what was posted."""

from django.conf import settings
from django.db import models
from django.utils import timezone

from chat.choices import Provider, Subject


class ChatAccount(models.Model):
    """A chat user (by the chat's own ids, never a display name) acting as one person."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                             related_name="chat_accounts")
    provider = models.CharField(max_length=8, choices=Provider.choices)
    workspace = models.CharField(max_length=64)  # Slack team id; Teams tenant id
    external_id = models.CharField(max_length=64)  # Slack user id; Teams AAD object id
    linked_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["provider", "workspace", "external_id"],
                                               name="chat_account_once")]

    def __str__(self) -> str:
        return f"{self.provider} {self.workspace}/{self.external_id} → {self.user_id}"

    def to_dict(self) -> dict:
        return {"id": self.pk, "user": self.user.username, "provider": self.provider,
                "workspace": self.workspace, "external_id": self.external_id,
                "linked_at": self.linked_at.isoformat()}


class ChatLinkCode(models.Model):
    """A one-time code a signed-in person sends from chat to link that chat account."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    digest = models.CharField(max_length=64, unique=True)  # sha256 of the code, never the code
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"link code of {self.user_id}"


class ChatPost(models.Model):
    """A proposal or escalation posted to chat (once each)."""

    subject = models.CharField(max_length=16, choices=Subject.choices)
    object_id = models.BigIntegerField()
    posted_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["subject", "object_id"],
                                               name="chat_post_once")]

    def __str__(self) -> str:
        return f"{self.subject} {self.object_id} posted"
