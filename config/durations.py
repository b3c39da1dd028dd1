"""Durations as people write them in manifests, switches, waivers and review intervals: a
whole number and one unit, `30s`, `15m`, `1h`, `7d`. One parser, so every field accepts and
refuses the same spellings (ISO 8601 `PT1H` was never accepted and is refused). Imports nothing
from Django (the manifest schema uses it)."""

import re
from typing import Any

from config.found import described

UNIT_SECONDS = {"d": 86_400, "h": 3_600, "m": 60, "s": 1}
# At most nine digits: `99999999999999999999d` is refused by its spelling, before any arithmetic.
_DURATION = re.compile(r"([0-9]{1,9})([smhd])")
MAX_DURATION_SECONDS = 30 * 86_400
DURATION_EXPECTED = "a duration: a whole number and a unit s, m, h or d, like 30s, 15m, 1h or 1d"


def duration_seconds(text: Any, *, at_most: int | None = MAX_DURATION_SECONDS) -> int:
    """Seconds in a duration such as 30s, 15m, 1h or 1d, above zero and at most `at_most`
    (30d unless said; None for no bound); ValueError with the message users see otherwise."""
    match = _DURATION.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        raise ValueError(f"expected {DURATION_EXPECTED}; got {described(text)}")
    seconds = int(match[1]) * UNIT_SECONDS[match[2]]
    if seconds == 0:
        raise ValueError(f"expected a positive duration, like 30s, 15m, 1h or 1d; got {text!r}")
    if at_most is not None and seconds > at_most:
        raise ValueError(
            f"expected a duration of at most {format_duration(at_most)}; got {text!r}")
    return seconds


def format_duration(seconds: int) -> str:
    """A duration in its largest exact unit, so 60m, 3600s and 1h all read 1h."""
    unit = next(unit for unit, size in UNIT_SECONDS.items() if seconds % size == 0)
    return f"{seconds // UNIT_SECONDS[unit]}{unit}"
