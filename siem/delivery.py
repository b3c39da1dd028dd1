"""Delivering the stream: each sink's next batch, in order, one stream at a time.

A run locks the sink's row, reads the batch after its cursor, sends it (retrying a few times,
tenacity) and moves the cursor in the same transaction. A worker killed after the send but
before the commit leaves the cursor where it was: the batch is sent again (at least once; the
receiver drops seqs it has). A batch the sink refuses leaves the cursor too, and the sink is
tried again after a backoff that doubles up to SIEM_RETRY_MAX_SECONDS."""

import logging
import os
import socket
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from redis.exceptions import RedisError

from audit.models import AuditEntry
from config import queues, retries
from config.scheduled_time import not_before
from siem import actions, formats, transports
from siem.choices import SinkKind, Stream
from siem.models import AlertRecord, Sink
from siem.transports import DeliveryFailed

log = logging.getLogger(__name__)
DUE = "siem:deliver:due"
DUE_SECONDS = 30  # a run killed before it cleared the flag blocks kicks no longer than this
QUEUE = "default"
OTLP_LOGS_PATH = "/v1/logs"


def _queue() -> Any:
    return queues.queue(QUEUE)


def kick() -> None:
    """After a commit that added to the stream: queue a delivery run unless one is due."""
    try:
        queue = _queue()
        if queue.connection.set(DUE, "1", nx=True, ex=DUE_SECONDS):
            queue.enqueue("siem.jobs.deliver_all", job_timeout=600)
    except RedisError as error:  # the periodic run still delivers them
        log.warning("could not queue a SIEM delivery: %s", error)


def schedule_retry(sink_id: int, when: datetime) -> None:
    """The sink's next try at `when` (its retry_at), rounded up to the second: RQ's scheduler
    keeps whole seconds, truncating, and a try before the backoff ends would do nothing."""
    # Not tenacity (config/retries.py): the backoff lasts up to SIEM_RETRY_MAX_SECONDS, is kept
    # on the sink's row (failures, retry_at) where people see it, and must outlive the worker.
    try:
        _queue().enqueue_at(not_before(when), "siem.jobs.retry", sink_id, job_timeout=600)
    except RedisError as error:  # the periodic run retries it
        log.warning("could not schedule the SIEM retry of sink %s: %s", sink_id, error)


def retry_after_backoff(sink_id: int) -> int:
    """A scheduled try after a failure. One that still runs before the backoff ends (a worker
    whose clock is behind the one that failed) is put off to the end, never dropped: a dropped
    try would leave the sink behind until the next periodic run."""
    sink = Sink.objects.filter(pk=sink_id, enabled=True).only("retry_at").first()
    if sink is None:
        return 0
    if sink.retry_at and sink.retry_at > timezone.now():
        schedule_retry(sink_id, sink.retry_at)
        return 0
    return deliver(sink_id)


def deliver_all() -> int:
    """Place queued alerts, then bring every enabled sink up to date; records delivered."""
    _queue().connection.delete(DUE)  # what commits from now on queues a run of its own
    while actions.place_alerts():
        pass
    delivered = sum(deliver(pk) for pk in
                    Sink.objects.filter(enabled=True).values_list("pk", flat=True))
    actions.prune_alerts()
    return delivered


def deliver(sink_id: int) -> int:
    """Send one sink everything after its cursors, batch by batch; records delivered."""
    delivered = 0
    while (sent := _deliver_batch(sink_id)) > 0:
        delivered += sent
    return delivered


@transaction.atomic
def _deliver_batch(sink_id: int) -> int:
    """One batch: how many records the sink took (0: nothing to send, or it failed)."""
    sink = Sink.objects.select_for_update(no_key=True).filter(pk=sink_id, enabled=True).first()
    if sink is None or (sink.retry_at and sink.retry_at > timezone.now()):
        return 0
    stream, records = next_batch(sink)
    if not records:
        return 0
    try:
        _send_with_retries(sink, records)
    except DeliveryFailed as error:
        wait = min(settings.SIEM_RETRY_MAX_SECONDS, 2 ** min(sink.failures, 16))
        actions.failed(sink, str(error), wait)
        retry_at = sink.retry_at
        transaction.on_commit(lambda: schedule_retry(sink_id, retry_at))
        log.warning("SIEM sink %s refused seqs %s-%s of the %s stream: %s", sink.name,
                    records[0]["seq"], records[-1]["seq"], stream, error)
        return 0
    actions.advance(sink, stream, records[-1]["seq"])
    return len(records)


def next_batch(sink: Sink) -> tuple[str, list[dict[str, Any]]]:
    """The stream with something after the sink's cursor (audit first), and its next records."""
    size = settings.SIEM_BATCH_SIZE
    entries = (AuditEntry.objects.filter(seq__gt=sink.audit_seq).defer("canonical")
               .order_by("seq")[:size])
    records = [{"stream": Stream.AUDIT.value, **entry.to_dict()} for entry in entries]
    if records:
        return Stream.AUDIT, records
    alerts = AlertRecord.objects.filter(seq__gt=sink.alert_seq).order_by("seq")[:size]
    return Stream.ALERT, [alert_record(row) for row in alerts]


def alert_record(row: AlertRecord) -> dict[str, Any]:
    return {**row.body, "stream": Stream.ALERT.value, "seq": row.seq,
            "prev_hash": row.prev_hash, "hash": row.hash}


def _send_with_retries(sink: Sink, records: list[dict[str, Any]]) -> None:
    retries.siem_batch(lambda: send_batch(sink, records), retry_on=DeliveryFailed,
                       attempts=settings.SIEM_RETRY_ATTEMPTS)


def send_batch(sink: Sink, records: list[dict[str, Any]]) -> None:
    """One attempt to hand a batch to a sink, in the sink's format."""
    hostname = socket.gethostname()
    if sink.kind == SinkKind.SYSLOG:
        transports.send_syslog(sink.url, sink.ca_pem, formats.syslog_batch(records, hostname))
        return
    headers = {"Content-Type": "application/json"}
    if sink.kind == SinkKind.OTLP:
        url = sink.url.rstrip("/")
        url = url if url.endswith(OTLP_LOGS_PATH) else url + OTLP_LOGS_PATH
        transports.send_http(url, formats.otlp_logs(records, hostname), headers)
        return
    if sink.token_env:
        token = os.environ.get(sink.token_env)
        if not token:
            raise DeliveryFailed(f"the token variable {sink.token_env} is not set")
        headers["Authorization"] = f"Splunk {token}"
    transports.send_http(sink.url, formats.hec_batch(records, hostname), headers)
