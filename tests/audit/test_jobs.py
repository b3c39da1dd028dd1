"""The periodic checkpoint runs on a real RQ worker and is registered with the cron scheduler."""

import subprocess
import sys

import django_rq
from rq.cron import CronScheduler

import audit
from audit.choices import AuditAction
from audit.models import AuditChainHead, AuditCheckpoint
from audit.verify import verify_trail
from tests.conftest import ROOT, child_env


def test_a_real_worker_signs_the_head_once(transactional_db, redis_client):
    for i in range(3):
        audit.record(actor="alice", action=AuditAction.ROLE_GRANTED, target=f"t{i}")
    queue = django_rq.get_queue("default")
    queue.enqueue("audit.jobs.checkpoint")
    queue.enqueue("audit.jobs.checkpoint")  # the head has not moved: no second checkpoint
    worker = subprocess.run(
        [sys.executable, "manage.py", "rqworker", "default", "--burst"],
        cwd=ROOT, env=child_env(), capture_output=True, text=True, timeout=120,
    )
    assert worker.returncode == 0, worker.stderr
    head = AuditChainHead.objects.get(pk=1)
    assert list(AuditCheckpoint.objects.values_list("seq", "head_hash")) == [(3, head.hash)]
    assert verify_trail().checkpoints == 1
    assert queue.failed_job_registry.count == 0


def test_the_cron_schedule_runs_the_checkpoint_every_configured_minutes(settings, redis_client):
    scheduler = CronScheduler(connection=redis_client)
    scheduler.load_config_from_file("config.cron")
    jobs = {job.func.__name__: job for job in scheduler.get_jobs()}
    assert jobs["checkpoint"].interval == settings.AUDIT_CHECKPOINT_MINUTES * 60
    assert jobs["checkpoint"].queue_name == "default"
