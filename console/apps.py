from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    """The server-rendered pages (as healthchecks keeps hc/front beside hc/api): it imports the
    domain apps (registry, reconciliation, audit) and none of them imports it."""

    name = "console"
