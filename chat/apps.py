from django.apps import AppConfig


class ChatConfig(AppConfig):
    """Approvals where approvers are: Slack messages and their buttons (Teams: same shape)."""

    name = "chat"
    verbose_name = "Chat approvals"
