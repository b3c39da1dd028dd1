"""The event outbox at /metrics (registered from runtime's AppConfig.ready): how many batches
of stored events are not yet judged against the behaviour rules, and for how long. A batch is
`counting` from its commit until its events are counted in their Redis windows, then
`waiting_for_jobs` until the jobs recording the rules it broke have run (runtime/models.py,
UncountedBatch). Rows that stay are rules neither recorded nor enforced: Redis unreachable,
ingest workers down or failing, or jobs a Redis failover lost (recount_events counts those
batches again, and `recounted` says how many it had to)."""

from collections.abc import Iterator

from django.db import DatabaseError
from django.db.models import Count, Min, Q
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from runtime.models import UncountedBatch

COUNTING = Q(queued_at__isnull=True)
WAITING = Q(queued_at__isnull=False)


class EventOutboxCollector(Collector):
    """Read at scrape time, in one query (the outbox holds only batches not yet done)."""

    def describe(self) -> list:
        return []  # registering must not query the database

    def collect(self) -> Iterator[GaugeMetricFamily]:
        try:
            found = UncountedBatch.objects.aggregate(
                counting=Count("pk", filter=COUNTING), waiting=Count("pk", filter=WAITING),
                counting_since=Min("received_at", filter=COUNTING),
                waiting_since=Min("received_at", filter=WAITING),
                recounted=Count("pk", filter=Q(attempt__gt=0)))
        except DatabaseError:
            return  # the database is down: /readyz says so; the scrape still answers
        now = timezone.now()
        batches = GaugeMetricFamily(
            "behaviour_event_batches_pending",
            "Batches of stored events not yet judged against the behaviour rules", labels=["state"])
        oldest = GaugeMetricFamily(
            "behaviour_event_batches_oldest_seconds",
            "How long ago the oldest such batch was received (a batch counted again keeps its "
            "age)", labels=["state"])
        for state, count, since in (("counting", found["counting"], found["counting_since"]),
                                    ("waiting_for_jobs", found["waiting"],
                                     found["waiting_since"])):
            batches.add_metric([state], count)
            oldest.add_metric([state], max(0.0, (now - since).total_seconds()) if since else 0)
        recounted = GaugeMetricFamily(
            "behaviour_event_batches_recounted",
            "Pending batches counted again because their counting or its jobs were lost")
        recounted.add_metric([], found["recounted"])
        yield batches
        yield oldest
        yield recounted
