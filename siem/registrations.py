"""What the SIEM stream connects at start-up, from SiemConfig.ready: its receivers (the
stream, fed by audit entries and alerts, connected on import) and its metrics."""

from prometheus_client import REGISTRY

from siem import receivers  # noqa: F401  (connects the stream to audit and alerts)
from siem.metrics import SiemCollector


def register() -> None:
    """Once per process (a collector already there is kept)."""
    if not any(isinstance(c, SiemCollector) for c in list(REGISTRY._collector_to_names)):
        REGISTRY.register(SiemCollector())
