"""Prometheus gauges of the SIEM stream: per sink and stream, how far behind it is."""

from collections.abc import Iterator

from django.db import DatabaseError
from prometheus_client.core import GaugeMetricFamily

from siem.models import Sink, stream_heads


class SiemCollector:
    """Read at scrape time from the database (a handful of rows)."""

    def describe(self) -> list:
        return []

    def collect(self) -> Iterator[GaugeMetricFamily]:
        lag = GaugeMetricFamily("siem_sink_lag_records",
                                "Records sequenced but not yet taken by a SIEM sink",
                                labels=["sink", "stream"])
        failures = GaugeMetricFamily("siem_sink_failures",
                                     "Failed delivery runs in a row of a SIEM sink",
                                     labels=["sink"])
        delivered = GaugeMetricFamily("siem_sink_delivered_timestamp_seconds",
                                      "When a SIEM sink last took a batch", labels=["sink"])
        try:
            heads = stream_heads()
            for sink in Sink.objects.filter(enabled=True):
                for stream, head in heads.items():
                    lag.add_metric([sink.name, stream], max(0, head - sink.cursor(stream)))
                failures.add_metric([sink.name], sink.failures)
                if sink.delivered_at:
                    delivered.add_metric([sink.name], sink.delivered_at.timestamp())
        except DatabaseError:
            return
        yield lag
        yield failures
        yield delivered

