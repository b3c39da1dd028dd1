"""A cron module for the leader tests: one job every second, which only counts its runs."""

from rq import cron

from tests.worker_jobs import count_cron_run

cron.register(count_cron_run, queue_name="default", interval=1)
