"""Durations are read one way (config/durations.py): what a manifest, a switch, a waiver and a
review interval accept and refuse, with the message a user sees."""

import pytest

from config.durations import DURATION_EXPECTED, duration_seconds, format_duration
from registry.manifest import duration_seconds as manifest_duration_seconds
from registry.recertification import MAX_REVIEW_SECONDS, review_seconds

NOT_A_DURATION = f"expected {DURATION_EXPECTED}; got "


@pytest.mark.parametrize(("text", "seconds"), [
    ("30s", 30), ("15m", 900), ("1h", 3600), ("7d", 604_800), ("3600s", 3600),
    ("30d", 2_592_000), ("0001h", 3600), ("2592000s", 2_592_000),
])
def test_what_users_write_today_is_read(text, seconds):
    assert duration_seconds(text) == seconds
    assert manifest_duration_seconds(text) == seconds


@pytest.mark.parametrize(("value", "message"), [
    ("1 hour", NOT_A_DURATION + "'1 hour'"),
    ("PT1H", NOT_A_DURATION + "'PT1H'"),          # ISO 8601 was never accepted
    ("P7D", NOT_A_DURATION + "'P7D'"),
    ("1w", NOT_A_DURATION + "'1w'"),
    ("1H", NOT_A_DURATION + "'1H'"),
    ("-1h", NOT_A_DURATION + "'-1h'"),
    ("+1h", NOT_A_DURATION + "'+1h'"),
    ("1.5h", NOT_A_DURATION + "'1.5h'"),
    ("nanh", NOT_A_DURATION + "'nanh'"),
    ("NaN", NOT_A_DURATION + "'NaN'"),
    ("infd", NOT_A_DURATION + "'infd'"),
    ("1e3s", NOT_A_DURATION + "'1e3s'"),
    (" 1h", NOT_A_DURATION + "' 1h'"),
    ("1h\n", NOT_A_DURATION + "'1h\\n'"),
    ("١h", NOT_A_DURATION + "'١h'"),               # an Arabic-Indic digit is not [0-9]
    ("1_0s", NOT_A_DURATION + "'1_0s'"),
    ("", NOT_A_DURATION + "''"),
    ("h", NOT_A_DURATION + "'h'"),
    ("1234567890s", NOT_A_DURATION + "'1234567890s'"),  # ten digits: refused by spelling
    ("9" * 100 + "d", NOT_A_DURATION + repr("9" * 50) + "... (101 characters)"),
    (60, NOT_A_DURATION + "60"),                   # a number where the string belongs
    (float("nan"), NOT_A_DURATION + "nan"),
    (True, NOT_A_DURATION + "true"),
    (None, NOT_A_DURATION + "null"),
    (["1h"], NOT_A_DURATION + "a list"),
    ({"h": 1}, NOT_A_DURATION + "a mapping"),
    ("0h", "expected a positive duration, like 30s, 15m, 1h or 1d; got '0h'"),
    ("000s", "expected a positive duration, like 30s, 15m, 1h or 1d; got '000s'"),
    ("31d", "expected a duration of at most 30d; got '31d'"),
    ("2592001s", "expected a duration of at most 30d; got '2592001s'"),
    ("999999999d", "expected a duration of at most 30d; got '999999999d'"),
])
def test_what_is_not_a_duration_is_refused_with_its_message(value, message):
    with pytest.raises(ValueError) as caught:
        duration_seconds(value)
    assert str(caught.value) == message


def test_a_review_interval_is_the_same_duration_up_to_ten_years():
    assert review_seconds("3650d") == MAX_REVIEW_SECONDS
    assert review_seconds("90d") == 90 * 86_400
    with pytest.raises(ValueError) as caught:
        review_seconds("3651d")
    assert str(caught.value) == "expected a duration of at most 3650d; got '3651d'"
    with pytest.raises(ValueError, match="^expected a duration: "):
        review_seconds("90 days")


def test_no_bound_when_the_caller_says_so():
    assert duration_seconds("999999999d", at_most=None) == 999_999_999 * 86_400


@pytest.mark.parametrize(("seconds", "text"), [
    (30, "30s"), (3600, "1h"), (5400, "90m"), (86_400, "1d"), (90 * 86_400, "90d"),
])
def test_a_duration_is_written_in_its_largest_exact_unit(seconds, text):
    assert format_duration(seconds) == text
    assert duration_seconds(text, at_most=None) == seconds
