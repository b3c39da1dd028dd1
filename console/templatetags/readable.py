"""What pages show people: `{% when value %}`, a human time ("3 minutes ago") with the exact
one on hover; `|plain`, a value without Python's `None` or a dict's repr."""

from datetime import UTC, datetime

from django import template
from django.utils import timezone
from django.utils.html import format_html
from django.utils.timesince import timesince, timeuntil

from audit.sentences import plain_text
from config.times import parse_timestamp

register = template.Library()


def _moment(value: datetime | str | None) -> datetime | None:
    if isinstance(value, str):
        try:
            value = parse_timestamp(value, naive=UTC)
        except ValueError:
            return None
    if isinstance(value, datetime) and timezone.is_naive(value):
        value = timezone.make_aware(value, UTC)
    return value if isinstance(value, datetime) else None


def human(moment: datetime, now: datetime | None = None) -> str:
    """"3 minutes ago", "in 2 hours" or "just now", to the largest unit."""
    now = now or timezone.now()
    if abs((now - moment).total_seconds()) < 60:
        return "just now"
    if moment > now:
        return f"in {timeuntil(moment, now, depth=1)}"
    return f"{timesince(moment, now, depth=1)} ago"


@register.simple_tag
def when(value: datetime | str | None, empty: str = "—") -> str:
    """A <time> element: relative text, ISO datetime attribute, exact UTC time as its title."""
    moment = _moment(value)
    if moment is None:
        return empty
    exact = moment.astimezone(UTC)
    return format_html('<time datetime="{}" title="{} UTC">{}</time>', exact.isoformat(),
                       exact.strftime("%Y-%m-%d %H:%M:%S"), human(exact))


@register.filter
def plain(value: object) -> str:
    """A stored value as a reader sees it: "—" for nothing, "k v, k v" for a mapping."""
    return plain_text(value) or "—"
