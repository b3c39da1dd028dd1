"""Timestamps arriving from outside (manifests, request bodies, query strings, events) and
read back from our own rows: one strict RFC 3339 parser. A time must carry its zone (or the
caller must say which zone its writer meant); anything else is ambiguous and refused, as are
dates without a time, times without seconds, week dates and the compact ISO forms that
`datetime.fromisoformat` lets through. Imports nothing from Django."""

import datetime as dt
import re
from typing import Annotated, Any

import msgspec

from config.found import described

TIMESTAMP_EXPECTED = "an RFC 3339 timestamp with a zone, like 2026-12-04T00:00:00Z"
_TIMESTAMP = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt ]([0-9]{2}):([0-9]{2}):([0-9]{2})"
    r"(?:\.([0-9]{1,9}))?([Zz]|[+-][0-9]{2}:[0-9]{2})?"
)


class NoZone(ValueError):
    """A well-formed time that does not say which zone it is in."""


def parse_timestamp(value: Any, *, naive: dt.tzinfo | None = None) -> dt.datetime:
    """The UTC instant of an RFC 3339 string or a datetime with a zone; a time without one is
    refused (NoZone) unless `naive` names the zone its writer meant; ValueError otherwise."""
    if isinstance(value, dt.datetime):
        stamp = value
    elif isinstance(value, str) and (match := _TIMESTAMP.fullmatch(value)):
        stamp = _from_match(value, match)
    else:
        raise ValueError(f"expected {TIMESTAMP_EXPECTED}; got {described(value)}")
    if stamp.utcoffset() is None:
        if naive is None:
            raise NoZone(
                f"expected {TIMESTAMP_EXPECTED}; got a timestamp without a zone: {value}")
        stamp = stamp.replace(tzinfo=naive)
    try:
        return stamp.astimezone(dt.UTC)
    except OverflowError:  # year 1 or 9999 shifted out of range by its offset
        raise ValueError(f"expected {TIMESTAMP_EXPECTED} within years 1-9999") from None


# The spellings msgspec reads as parse_timestamp does (at most six fraction digits: it rounds
# more where the grammar truncates; a zone with its colon: it also takes +0100), one per line.
_READ_ALIKE = re.compile(
    r"(?:[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ](?:[01][0-9]|2[0-3]):[0-9]{2}:[0-9]{2}"
    r"(?:\.[0-9]{1,6})?(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])\n)*")
_AWARE = list[Annotated[dt.datetime, msgspec.Meta(tz=True)]]


def parse_many(values: list[Any]) -> list[dt.datetime] | None:
    """parse_timestamp of each string, read in C (a tenth of the time: ingest reads a
    thousand a batch) when every one is spelled as both readers read it alike; None when
    any one is not, is not a string, or is refused: then parse each with parse_timestamp,
    which says why."""
    try:
        text = "\n".join(values)
    except TypeError:  # a number, None or a datetime among them
        return None
    if not _READ_ALIKE.fullmatch(text + "\n" if values else ""):
        return None
    try:
        stamps = msgspec.convert(values, _AWARE)
        return [s if s.tzinfo is dt.UTC else s.astimezone(dt.UTC) for s in stamps]
    except (msgspec.ValidationError, OverflowError):  # a day or second that does not exist
        return None


def _from_match(value: str, match: re.Match[str]) -> dt.datetime:
    """The datetime of a string the grammar took: `fromisoformat` (in C, a seventh of the
    time: ingest reads one per event) where it reads the same instant on every supported
    Python (hours 0-23, an upper-case Z or an offset within +-23:59; the fraction truncated to
    microseconds by both), else built from the parts, which also says what is wrong."""
    zone = match.group(8)
    if match.group(4) < "24" and (zone is None or zone == "Z" or (
            zone != "z" and zone[1:3] < "24" and zone[4:6] < "60")):
        try:
            return dt.datetime.fromisoformat(value)  # noqa: TID251 - after the grammar
        except ValueError:
            pass  # the parts say why
    return _from_parts(value, *match.groups())


def _from_parts(value: str, *parts: str | None) -> dt.datetime:
    *fields, fraction, zone = parts
    tz: dt.tzinfo | None = None
    if zone is not None and zone.upper() == "Z":
        tz = dt.UTC
    elif zone is not None:
        hours, minutes = int(zone[1:3]), int(zone[4:6])
        if hours > 23 or minutes > 59:
            raise ValueError(f"expected {TIMESTAMP_EXPECTED}; got {value!r}")
        offset = dt.timedelta(hours=hours, minutes=minutes)
        tz = dt.timezone(-offset if zone[0] == "-" else offset)
    try:
        micro = int((fraction or "").ljust(6, "0")[:6])
        return dt.datetime(*map(int, fields), micro, tzinfo=tz)  # type: ignore[arg-type]
    except ValueError:
        raise ValueError(f"expected {TIMESTAMP_EXPECTED}; got {value!r}") from None


def format_timestamp(stamp: dt.datetime) -> str:
    """`YYYY-MM-DDTHH:MM:SS[.ffffff]Z` in UTC: one spelling per instant."""
    utc = stamp.astimezone(dt.UTC)
    text = (
        f"{utc.year:04d}-{utc.month:02d}-{utc.day:02d}"
        f"T{utc.hour:02d}:{utc.minute:02d}:{utc.second:02d}"
    )
    return f"{text}.{utc.microsecond:06d}Z" if utc.microsecond else f"{text}Z"
