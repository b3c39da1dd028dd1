"""Whether any sink is enabled, remembered briefly per process: every audit placement and
alert asks, and most installations have no sink at all."""

import time

from siem.models import Sink

TTL_SECONDS = 5.0
_known: dict[str, float | bool] = {}


def any_enabled() -> bool:
    if time.monotonic() < float(_known.get("until", 0.0)):
        return bool(_known["enabled"])
    enabled = Sink.objects.filter(enabled=True).exists()
    _known.update(enabled=enabled, until=time.monotonic() + TTL_SECONDS)
    return enabled


def forget() -> None:
    """A sink changed in this process: ask again next time."""
    _known.clear()
