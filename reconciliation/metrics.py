"""Prometheus figures of the reconcile loop, read from the database at scrape time so that the
work of every worker process counts (worker processes have no scrape endpoint of their own)."""

from collections.abc import Iterator
from datetime import timedelta

from django.db import DatabaseError
from django.db.models import Count, DurationField, ExpressionWrapper, F, Q, Sum
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from reconciliation.finding_times import (
    DRIFT_ONLY,
    DRIFT_STARTED,
    FIXED_THIS_OCCURRENCE,
    OBSERVED_IN_ORDER,
)
from reconciliation.models import BreakerTrip, ControlState, Correction, Finding, ReconcileRun

VERIFY_BUCKETS = (1, 5, 15, 30, 60, 300, 900)


class ReconcileCollector(Collector):
    """Passes, pass duration, drift by kind and severity, corrections by result, time from
    drift observed to verified, and the post-convergence drift counter (must stay zero)."""

    def describe(self) -> list:
        return []  # registering must not query the database (prometheus calls collect otherwise)

    def collect(self) -> Iterator[object]:
        try:
            yield from self._collect()
        except DatabaseError:
            return  # the database is down: /readyz says so; the scrape still answers

    def _collect(self) -> Iterator[object]:
        passes = CounterMetricFamily("reconcile_passes", "Reconcile passes by result",
                                     labels=["result"])
        duration = 0.0
        count = 0
        for row in ReconcileRun.objects.values("result").annotate(n=Count("pk"),
                                                                  ms=Sum("duration_ms")):
            passes.add_metric([row["result"]], row["n"])
            duration += (row["ms"] or 0) / 1000
            count += row["n"]
        yield passes
        seconds = GaugeMetricFamily("reconcile_pass_duration_seconds_sum",
                                    "Total time spent in reconcile passes")
        seconds.add_metric([], duration)
        yield seconds
        passes_count = GaugeMetricFamily("reconcile_pass_duration_seconds_count",
                                         "Number of timed reconcile passes")
        passes_count.add_metric([], count)
        yield passes_count

        drift = CounterMetricFamily("drift_findings", "Drift findings by kind and severity",
                                    labels=["kind", "severity"])
        for row in Finding.objects.values("kind", "severity").annotate(n=Count("pk")):
            drift.add_metric([row["kind"], row["severity"]], row["n"])
        yield drift

        corrections = CounterMetricFamily("corrections", "Corrective changes by result",
                                          labels=["result"])
        for row in Correction.objects.values("result").annotate(n=Count("pk")):
            corrections.add_metric([row["result"]], row["n"])
        yield corrections

        elapsed = ExpressionWrapper(F("corrected_at") - DRIFT_STARTED,
                                    output_field=DurationField())
        # the current occurrence's verified correction only (a reopened finding keeps the
        # previous one's corrected_at, which would count as a negative time)
        verified = Finding.objects.filter(
            DRIFT_ONLY & FIXED_THIS_OCCURRENCE & OBSERVED_IN_ORDER).annotate(
            took=elapsed)
        counts = verified.aggregate(
            total=Count("pk"), seconds=Sum("took"),
            **{f"le_{b}": Count("pk", filter=Q(took__lte=timedelta(seconds=b)))
               for b in VERIFY_BUCKETS})
        buckets = [(f"{b:.1f}", counts[f"le_{b}"]) for b in VERIFY_BUCKETS]
        buckets.append(("+Inf", counts["total"]))
        histogram = HistogramMetricFamily(
            "drift_to_verified_seconds", "Time from drift observed to correction verified",
            buckets=buckets,
            sum_value=counts["seconds"].total_seconds() if counts["seconds"] else 0.0)
        yield histogram

        control = ControlState.load()
        post = GaugeMetricFamily(
            "post_convergence_drift_total",
            "Passes that found drift on a converged agent with no new approved version "
            "(something outside the reconciler changed it; must stay 0)")
        post.add_metric([], control.post_convergence_drift)
        yield post
        breaker = GaugeMetricFamily("breaker_tripped", "1 while automatic correction is paused")
        breaker.add_metric([], 1 if control.breaker_tripped_at else 0)
        yield breaker
        scoped = GaugeMetricFamily(
            "breaker_scope_tripped",
            "1 for each owner or team whose agents' automatic correction is paused",
            labels=["scope"])
        for scope in BreakerTrip.objects.order_by("scope").values_list("scope", flat=True):
            scoped.add_metric([scope], 1)
        yield scoped
