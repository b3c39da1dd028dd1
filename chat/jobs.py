"""RQ entry points of chat approvals (thin: chat/posting.py does the work)."""

from chat import posting


def post_pending() -> int:
    """Post new proposals and escalations to Slack (kicked by alerts, and by the cron)."""
    return posting.post_pending()
