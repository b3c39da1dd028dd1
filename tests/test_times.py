"""Timestamps from outside are read by one strict parser (config/times.py): a zone is
required (or named by the caller), and what `fromisoformat` would guess at is refused."""

import random
from datetime import UTC, datetime, timedelta, timezone

import pytest

from config.times import TIMESTAMP_EXPECTED, NoZone, format_timestamp, parse_timestamp

EXPECTED = f"expected {TIMESTAMP_EXPECTED}; got "


@pytest.mark.parametrize(("text", "instant"), [
    ("2026-12-04T00:00:00Z", datetime(2026, 12, 4, tzinfo=UTC)),
    ("2026-12-04t00:00:00z", datetime(2026, 12, 4, tzinfo=UTC)),
    ("2026-12-04 00:00:00Z", datetime(2026, 12, 4, tzinfo=UTC)),
    ("2026-12-04T01:30:00+01:30", datetime(2026, 12, 4, tzinfo=UTC)),
    ("2026-12-03T19:00:00-05:00", datetime(2026, 12, 4, tzinfo=UTC)),
    ("2026-12-04T00:00:00.5Z", datetime(2026, 12, 4, 0, 0, 0, 500_000, tzinfo=UTC)),
    ("2026-12-04T00:00:00.123456789Z", datetime(2026, 12, 4, 0, 0, 0, 123_456, tzinfo=UTC)),
    ("2026-12-04T00:00:00+00:00", datetime(2026, 12, 4, tzinfo=UTC)),
])
def test_an_rfc_3339_time_with_its_zone_is_its_utc_instant(text, instant):
    parsed = parse_timestamp(text)
    assert parsed == instant and parsed.tzinfo is UTC


@pytest.mark.parametrize(("value", "message"), [
    ("2026-12-04", EXPECTED + "'2026-12-04'"),                       # a date: which instant?
    ("2026-12-04T00:00Z", EXPECTED + "'2026-12-04T00:00Z'"),         # no seconds
    ("20261204T000000Z", EXPECTED + "'20261204T000000Z'"),           # compact ISO form
    ("2026-W49-5T00:00:00Z", EXPECTED + "'2026-W49-5T00:00:00Z'"),   # week date
    ("2026-12-04T00:00:00+0100", EXPECTED + "'2026-12-04T00:00:00+0100'"),
    ("2026-12-04T00:00:00 UTC", EXPECTED + "'2026-12-04T00:00:00 UTC'"),
    ("2026-12-04T00:00:00+24:00", EXPECTED + "'2026-12-04T00:00:00+24:00'"),
    ("2026-12-04T00:00:00+05:60", EXPECTED + "'2026-12-04T00:00:00+05:60'"),
    ("2026-02-30T00:00:00Z", EXPECTED + "'2026-02-30T00:00:00Z'"),
    ("2026-12-04T24:00:00Z", EXPECTED + "'2026-12-04T24:00:00Z'"),
    ("2026-12-04T00:00:60Z", EXPECTED + "'2026-12-04T00:00:60Z'"),
    ("0000-01-01T00:00:00Z", EXPECTED + "'0000-01-01T00:00:00Z'"),
    ("-2026-12-04T00:00:00Z", EXPECTED + "'-2026-12-04T00:00:00Z'"),
    ("１２026-12-04T00:00:00Z", EXPECTED + "'１２026-12-04T00:00:00Z'"),
    ("2026-12-04T00:00:00.Z", EXPECTED + "'2026-12-04T00:00:00.Z'"),
    ("2026-12-04T00:00:00Z\n", EXPECTED + "'2026-12-04T00:00:00Z\\n'"),
    ("NaN", EXPECTED + "'NaN'"),
    ("now", EXPECTED + "'now'"),
    ("", EXPECTED + "''"),
    ("2" * 100, EXPECTED + repr("2" * 50) + "... (100 characters)"),
    (1764806400, EXPECTED + "1764806400"),     # a number where the string belongs
    (1.7648064e9, EXPECTED + "1764806400.0"),
    (float("nan"), EXPECTED + "nan"),
    (-1, EXPECTED + "-1"),
    (True, EXPECTED + "true"),
    (None, EXPECTED + "null"),
    ({"at": "2026-12-04T00:00:00Z"}, EXPECTED + "a mapping"),
    ("9999-12-31T23:59:59-01:00", f"expected {TIMESTAMP_EXPECTED} within years 1-9999"),
    ("0001-01-01T00:00:00+01:00", f"expected {TIMESTAMP_EXPECTED} within years 1-9999"),
])
def test_what_is_not_a_time_with_a_zone_is_refused_with_its_message(value, message):
    with pytest.raises(ValueError) as caught:
        parse_timestamp(value)
    assert str(caught.value) == message
    assert not isinstance(caught.value, NoZone)


@pytest.mark.parametrize("value", ["2026-12-04T00:00:00", "2026-12-04 00:00:00.5",
                                   datetime(2026, 12, 4)])
def test_a_time_without_a_zone_is_ambiguous_unless_the_caller_names_it(value):
    with pytest.raises(NoZone, match="without a zone"):
        parse_timestamp(value)
    assert parse_timestamp(value, naive=UTC).replace(microsecond=0) == datetime(
        2026, 12, 4, tzinfo=UTC)
    plus_two = timezone(timedelta(hours=2))
    assert parse_timestamp(value, naive=plus_two).replace(microsecond=0) == datetime(
        2026, 12, 3, 22, tzinfo=UTC)


def test_an_aware_datetime_is_its_utc_instant():
    moment = datetime(2026, 12, 4, 1, tzinfo=timezone(timedelta(hours=1)))
    assert parse_timestamp(moment) == datetime(2026, 12, 4, tzinfo=UTC)


@pytest.mark.parametrize("text", ["2026-12-04T00:00:00Z", "2026-12-04T00:00:00.000001Z"])
def test_one_spelling_per_instant_reads_back(text):
    assert format_timestamp(parse_timestamp(text)) == text



def _outcome(text: str) -> tuple:
    try:
        return ("read", parse_timestamp(text))
    except ValueError as error:
        return (type(error), str(error))


ZONES = ["", "Z", "z", "+00:00", "-05:30", "+23:59", "-23:59", "+0100", "+24:00", "+01:60"]


def spellings(seed: int, count: int) -> list[str]:
    """Times spelled at and past the limits of each part (dates, times, fractions, zones)."""
    pick = random.Random(seed).choice
    return [f"{pick(['0001', '1970', '2024', '2026', '9999'])}-{pick(['00', '01', '02', '13'])}"
            f"-{pick(['01', '29', '31', '32'])}{pick('Tt ')}"
            f"{pick(['00', '09', '23', '24', '99'])}:{pick(['00', '59', '60'])}"
            f":{pick(['00', '59', '60'])}"
            f"{pick(['', '.5', '.123456', '.1234567', '.9999995', '.999999999'])}"
            f"{pick(ZONES)}"
            for _ in range(count)]


@pytest.mark.parametrize("seed", range(4))
def test_the_fast_reading_gives_the_instant_or_the_error_of_the_parts(seed, monkeypatch):
    """Every spelling the grammar takes is read as building it from its parts reads it, or
    refused with the same error (dates, times, fractions and zones at and past their
    limits): fromisoformat is only a faster way to the same answer."""
    from config import times

    texts = spellings(seed, 2000)
    fast = [_outcome(text) for text in texts]
    monkeypatch.setattr(times, "_from_match",
                        lambda value, match: times._from_parts(value, *match.groups()))
    slow = [_outcome(text) for text in texts]
    for text, got, expected in zip(texts, fast, slow, strict=True):
        assert got == expected, text
        assert got[0] != "read" or got[1].tzinfo is UTC
    assert {kind for kind, _ in slow} >= {"read", NoZone, ValueError}  # every outcome tried


@pytest.mark.parametrize("seed", range(4))
def test_many_times_read_at_once_are_each_one_read_alone_or_left_to_it(seed):
    """parse_many (ingest's batch of times read in C) gives what parse_timestamp gives each
    string, or None so that each is read alone: never another instant, never a time
    parse_timestamp refuses (msgspec rounds a seventh fraction digit and takes +0100)."""
    from config.times import parse_many

    texts = spellings(seed, 6000)
    good = []
    for text in texts:
        alone = _outcome(text)
        together = parse_many([text])
        if together is not None:
            assert [("read", together[0])] == [alone], text
            assert together[0].tzinfo is UTC
            good.append(text)
    assert len(good) > 30  # times spelled alike were read at once
    assert parse_many(good) == [parse_timestamp(text) for text in good]
    assert parse_many(texts) is None  # one time spelled otherwise: each is read alone


def test_a_batch_of_usual_times_is_read_at_once():
    from config.times import parse_many

    now = datetime.now(UTC)
    texts = [(now - timedelta(seconds=n / 7)).isoformat() for n in range(500)]
    texts += [stamp.replace("+00:00", "Z") for stamp in texts]
    texts += [(now - timedelta(hours=n)).astimezone(timezone(timedelta(hours=-5))).isoformat()
              for n in range(50)]
    assert parse_many(texts) == [parse_timestamp(text) for text in texts]
    assert parse_many([*texts, "2026-12-04T00:00:00.1234567Z"]) is None
    assert parse_many([*texts, "2026-12-04T00:00:00"]) is None  # no zone: the reader says so


@pytest.mark.parametrize("stranger", [1764806400, 1.7648064e9, None, True,
                                      datetime(2026, 12, 4, tzinfo=UTC),
                                      b"2026-12-04T00:00:00Z", ["2026-12-04T00:00:00Z"]])
def test_times_read_at_once_leave_anything_but_text_to_the_strict_reader(stranger):
    from config.times import parse_many

    assert parse_many(["2026-12-04T00:00:00Z", stranger]) is None
