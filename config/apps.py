from django.apps import AppConfig
from django.core import checks
from django.db.backends.signals import connection_created

# Neither reads a model: imported with the app config, before the models load.
from config import deploy_checks
from config.pooling import refuse_shared_sessions


class ConfigConfig(AppConfig):
    """The project shell as an app: its commands (`cron`), start-up guards and deploy checks."""

    name = "config"
    label = "config"

    def ready(self) -> None:
        # The audit writer's session-level lock needs a session of its own (config/pooling.py).
        connection_created.connect(refuse_shared_sessions, dispatch_uid="refuse_shared_sessions")
        checks.register(deploy_checks.hosts, checks.Tags.security, deploy=True)
        checks.register(deploy_checks.witnesses, checks.Tags.security, deploy=True)
        # a deploy check that also needs --database: `migrate` never waits on Redis
        checks.register(deploy_checks.redis_answers, checks.Tags.database, deploy=True)
