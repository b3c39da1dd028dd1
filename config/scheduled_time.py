"""When to schedule an RQ job so it never runs early: RQ's scheduler keeps whole seconds
(truncating the time it is given), so a job due at 12:00:05.4 would run at 12:00:05, before
what it waits for (a decision's deadline, a sink's backoff, a window's end) has come."""

from datetime import datetime, timedelta


def not_before(when: datetime) -> datetime:
    """`when` rounded up to a whole second."""
    return when if not when.microsecond else (
        when.replace(microsecond=0) + timedelta(seconds=1))
