from django.apps import AppConfig


class ChatConfig(AppConfig):
    """Approvals where approvers are: Slack messages and their buttons (Teams: same shape)."""

    name = "chat"
    verbose_name = "Chat approvals"

    def ready(self) -> None:
        from chat import receivers  # noqa: F401  (posts escalations as their alerts commit)
