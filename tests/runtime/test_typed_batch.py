"""Ingest's fast path (runtime/typed_batch.py) takes exactly what parse_batch and
validate_event take, as the same events, or gives the batch to them: it never takes an event
they refuse. Generated batches mix valid events with every kind of wrong value."""

import json
from dataclasses import fields
from datetime import timedelta

import pytest
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.renderers import JSONRenderer

from config.renderers import FastJSONRenderer
from runtime.events import KINDS, TEXT_FIELDS, BatchError, Event, parse_batch, validate_event
from runtime.typed_batch import read_batch

NOW = timezone.now()

ANY_TEXT = st.text(st.characters(codec=None), max_size=8)  # surrogates too
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-2, 10**13), st.integers(10**300, 10**400),
    st.floats(allow_nan=True, allow_infinity=True), ANY_TEXT)
WRONG = st.one_of(SCALARS, st.lists(st.integers(), max_size=2),
                  st.dictionaries(st.text(max_size=4), st.integers(), max_size=2))


def _moment(seconds: int, form: int) -> str:
    moment = NOW + timedelta(seconds=seconds)
    return [moment.isoformat(), moment.strftime("%Y-%m-%dT%H:%M:%SZ"),
            moment.strftime("%Y-%m-%d %H:%M:%S.%f123+00:00"),
            moment.strftime("%Y-%m-%dt%H:%M:%Sz"), moment.strftime("%Y-%m-%dT%H:%M:%S"),
            moment.strftime("%Y%m%dT%H%M%SZ")][form]


TIMES = st.builds(_moment, st.integers(-31 * 86400, 400), st.integers(0, 5))


ABSENT = object()
NUMBERS = st.one_of(st.integers(0, 10**12), st.floats(0, 1e12))
# Each field's values validate_event takes, at their bounds too.
VALID = {
    "id": st.one_of(st.text(min_size=1, max_size=4), st.text(min_size=128, max_size=128)),
    "agent": st.sampled_from(["refund-agent", "Math Tutor", "support_bot", " a ", "b" * 63,
                              "Ünïcode bot", "x" * 200 + " y"]),
    "ts": st.builds(_moment, st.integers(-30 * 86400 + 5, 290), st.integers(0, 3)),
    "kind": st.sampled_from(KINDS),
    **{name: st.one_of(st.just(""), st.text(max_size=3), st.text(min_size=limit, max_size=limit))
       for name, limit in TEXT_FIELDS.items()},
    "amount": st.one_of(NUMBERS, st.sampled_from(["800", "800.50", "0", "0.000000000001"])),
    "input_tokens": st.integers(0, 10**12),
    "output_tokens": st.integers(0, 10**12),
    "cost": NUMBERS,
    "attributes": st.dictionaries(st.text(max_size=128), st.one_of(
        st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=4), st.text(min_size=512, max_size=512)), max_size=3),
}
# Each field's values at and past the bounds, of other types, null, or absent.
EDGE = {
    **{name: st.one_of(strategy, WRONG, st.just(ABSENT)) for name, strategy in VALID.items()},
    "id": st.one_of(st.just(""), st.text(min_size=129, max_size=129), WRONG, st.just(ABSENT)),
    "kind": st.one_of(st.sampled_from(KINDS), WRONG, st.just(ABSENT)),
    "agent": st.one_of(st.sampled_from(["", "  ", "-", "a" * 64, "x" * 257, "ab_", "A B"]),
                       st.text(max_size=6), WRONG, st.just(ABSENT)),
    "ts": st.one_of(TIMES, WRONG, st.just(ABSENT)),
    **{name: st.one_of(st.text(min_size=limit + 1, max_size=limit + 1), WRONG, st.just(ABSENT))
       for name, limit in TEXT_FIELDS.items()},
    "amount": st.one_of(st.floats(), st.integers(-1, 2 * 10**12), st.floats(1e12, 2e12),
                        st.integers(10**12, 2 * 10**12), st.just(-0.0), st.sampled_from(
        ["1e3", "-1", "abc", "0.1234567890123", "01", " 1", "1.", "10000000000000"]), WRONG),
    "input_tokens": st.one_of(st.integers(-1, 0), st.integers(10**12, 10**12 + 1),
                              st.floats(0, 5), WRONG),
    "cost": st.one_of(st.floats(), st.floats(1e12, 2e12), st.integers(10**12, 2 * 10**12),
                      st.floats(-1, 0), st.integers(-2, 0), WRONG),
    "attributes": st.one_of(st.dictionaries(
        st.text(max_size=130), st.one_of(SCALARS, WRONG, st.text(min_size=513, max_size=513)),
        min_size=1, max_size=3), st.dictionaries(st.text(max_size=3), st.none(), min_size=65,
                                                  max_size=66), WRONG),
    "unknown": WRONG,
}
REQUIRED = ("id", "agent", "ts", "kind")


NEEDS = {"action": "action", "data_access": "resource", "tool_call": "tool"}


@st.composite
def batches(draw: st.DrawFn) -> list:
    """Valid events (each with what its kind needs), then none to two changes anywhere in the
    batch: a field set to an edge value or removed, or an event that is not an object."""
    items = []
    for _ in range(draw(st.integers(0, 4))):
        item = draw(st.fixed_dictionaries(
            {name: VALID[name] for name in REQUIRED},
            optional={name: VALID[name] for name in VALID if name not in REQUIRED}))
        if needed := NEEDS.get(item["kind"]):
            item[needed] = draw(st.text(min_size=1, max_size=3))
        items.append(item)
    for _ in range(draw(st.integers(0, 2)) if items else 0):
        position = draw(st.integers(0, len(items) - 1))
        if draw(st.integers(0, 20)) == 0:
            items[position] = draw(WRONG)
            continue
        if not isinstance(items[position], dict):
            continue
        name = draw(st.sampled_from(sorted(EDGE)))
        value = draw(EDGE[name])
        if value is ABSENT:
            items[position].pop(name, None)
        else:
            items[position][name] = value
    return items


def _slow(body: str) -> list | None:
    """What parse_batch and validate_event make of a body (None: the batch is refused)."""
    try:
        return [validate_event(item, NOW) for item in parse_batch(body, ndjson=False)]
    except BatchError:
        return None


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches(), st.booleans())
def test_the_fast_path_takes_only_what_validation_takes_as_the_same_events(items, spaced):
    body = json.dumps(items, allow_nan=True, indent=1 if spaced else None, ensure_ascii=spaced)
    fast = read_batch(body, NOW)
    if fast is None:
        return
    slow = _slow(body)
    assert slow is not None, body
    assert not [reason for reason in slow if isinstance(reason, str)], body
    assert repr(fast) == repr(slow)  # repr: 5 and 5.0 differ, as the stored values would


BOUNDS = {
    "id": ["", "x" * 128, "x" * 129, "é" * 128, "é" * 129, "😀" * 128, "a\x00", "\ud800", None,
           5, ["x"]],
    "agent": ["", " ", "-", "a" * 63, "a" * 64, "A" * 63, "x" * 256, "x" * 257, "ab_c", "Ab c",
              None, 1],
    "ts": [_moment(-30 * 86400 + 5, 0), _moment(-30 * 86400 - 5, 0), _moment(290, 1),
           _moment(310, 1), _moment(0, 2), _moment(0, 3), _moment(0, 4), _moment(0, 5),
           "2026-12-04", None, 1_700_000_000],
    "kind": [*KINDS, "other", None, 1],
    **{name: ["", "x" * limit, "é" * limit, "x" * (limit + 1), "\x00", "b\udfff", None, 1, ["x"]]
       for name, limit in TEXT_FIELDS.items()},
    "amount": [0, -0.0, 1e12, 10**12, 1e12 * (1 + 1e-15), 10**12 + 1, -1, 10**400, "800",
               "800.50", "0.000000000001", "1e3", "-1", "01", True, None, [1], {"a": 1}],
    "input_tokens": [0, 10**12, 10**12 + 1, -1, 1.0, True, None, "1", 10**400],
    "output_tokens": [0, 10**12, 10**12 + 1, -1, 1.5, False, None],
    "cost": [0, -0.0, 1e12, 10**12, 1e12 * (1 + 1e-15), 10**12 + 1, -1, -1e-300, 10**400,
             True, "1", None],
    "attributes": [{}, {"k" * 128: 1}, {"k" * 129: 1}, {"k": "v" * 512}, {"k": "v" * 513},
                   {"k": [1]}, {"k": {}}, {"k": 10**400}, {"k": "\x00"}, {"\x00": 1},
                   {"k": "\ud800"}, {str(i): 1 for i in range(64)},
                   {str(i): None for i in range(65)}, [], None, "x"],
    "unknown": [1],
}


@pytest.mark.parametrize("name, value", [(name, value) for name, values in BOUNDS.items()
                                         for value in values],
                         ids=[f"{name}-{index}" for name, values in BOUNDS.items()
                              for index in range(len(values))])  # the same on every worker
def test_at_each_bound_both_paths_agree(name, value):
    """One event at a bound of one field, next to a valid one: the fast path takes the batch
    exactly when validation takes both events, and makes the same events."""
    base = {"id": "a", "agent": "refund-agent", "ts": NOW.isoformat(), "kind": "tool_call",
            "tool": "orders.lookup", "resource": "orders_db", "action": "refund"}
    body = json.dumps([base, {**base, "id": "b", name: value}])
    fast, slow = read_batch(body, NOW), _slow(body)
    valid = slow is not None and not [reason for reason in slow if isinstance(reason, str)]
    assert (fast is not None) == valid, (slow, fast)
    if valid:
        assert repr(fast) == repr(slow)


def test_the_fast_path_is_taken_by_the_batches_agents_send():
    """The bench's and the SDK's shapes, every field in use: read whole by the fast path."""
    now = NOW.isoformat()
    items = [{"id": f"e{i}", "agent": "refund-agent", "ts": now, "kind": "data_access",
              "resource": "customers_db", "record": f"c-{i}", "tool": "orders.lookup"}
             for i in range(50)]
    items.append({"id": "full", "agent": "Math Tutor", "ts": now, "kind": "action",
                  "action": "refund", "amount": "800.50", "approved_by": "dana",
                  "decision_id": "d1", "trace_id": "t" * 32, "span_id": "s" * 16,
                  "model": "gpt", "operation": "chat", "error": "", "input_tokens": 10,
                  "output_tokens": 0, "cost": 0, "attributes": {"k": "v", "n": 1.5, "b": True}})
    body = json.dumps(items)
    fast = read_batch(body, NOW)
    assert fast is not None
    assert repr(fast) == repr(_slow(body))
    assert fast[-1].agent == "math-tutor" and fast[-1].label == "Math Tutor"
    assert fast[-1].amount == 800.5 and fast[-1].cost == 0.0


def test_one_refused_event_sends_the_whole_batch_to_validation():
    now = NOW.isoformat()
    good = {"id": "a", "agent": "refund-agent", "ts": now, "kind": "tool_call", "tool": "x"}
    for bad in ({**good, "id": "b", "tool": ""}, {**good, "id": "b", "ts": "2026-12-04"},
                {**good, "id": "b", "agent": "---"}, {**good, "id": "b", "amount": "1e3"},
                {**good, "id": "b", "attributes": {"k": [1]}}, {**good, "id": "b", "x": 1},
                {**good, "id": "b", "input_tokens": 1.0}):
        assert read_batch(json.dumps([good, bad]), NOW) is None, bad
    assert read_batch(json.dumps([good] * 5001), NOW) is None  # over MAX_EVENTS: a 413
    assert read_batch(json.dumps([good]) + "\n" + json.dumps([good]), NOW) is None


def test_the_report_encoder_writes_drf_s_bytes():
    reports = [{"accepted": 1, "results": [{"id": "a\u2028b\u2029ü😀", "status": "accepted"},
                                           {"id": None, "status": "rejected", "reason": "x"}]},
               [1, 2.5, True, None, "é"], {}]
    for data in reports:
        assert FastJSONRenderer().render(data) == JSONRenderer().render(data)
        indented = "application/json; indent=2"  # DRF's own renderer writes that
        assert (FastJSONRenderer().render(data, indented)
                == JSONRenderer().render(data, indented))


def test_the_fast_path_s_events_hold_every_field_of_their_own():
    """Event.whole is given every field (none left to the class's defaults)."""
    now = NOW.isoformat()
    (event,) = read_batch(json.dumps([{"id": "a", "agent": "refund-agent", "ts": now,
                                       "kind": "model_call"}]), NOW)
    assert set(vars(event)) == {f.name for f in fields(Event)}
