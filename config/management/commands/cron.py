"""`manage.py cron [MODULE]`: the periodic jobs, enqueued by whichever cron process leads."""

import logging
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from config.cron_leader import LeaderCronScheduler


class Command(BaseCommand):
    help = ("Run the periodic jobs (config.cron by default). Run one per host for availability: "
            "one process leads and enqueues, the others take over within CRON_LEADER_SECONDS.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("module", nargs="?", default="config.cron",
                            help="module that registers the jobs (default: config.cron)")

    def handle(self, *args: Any, **options: Any) -> None:
        scheduler = LeaderCronScheduler(logging_level=logging.INFO)
        scheduler.load_config_from_file(options["module"])
        self.stdout.write(f"cron {scheduler.name}: {len(scheduler.get_jobs())} jobs; "
                          "enqueueing while it leads")
        scheduler.start()
