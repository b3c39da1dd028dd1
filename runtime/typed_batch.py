"""Ingest's fast path: a JSON array of events that all have the usual shape, decoded and
type-checked in C (msgspec: the field names, types and lengths), with only what types cannot
say checked here (the agent's name, the time, what each kind needs, amounts, attributes).

It takes a batch whole or not at all, and never refuses an event: one unknown field, one
value of another type, one event that runtime.events' validate_event would refuse, and the
whole batch goes to parse_batch and validate_event, which decide and say why. What it takes
is exactly what that path takes, as the same events (tests/runtime/test_typed_batch.py holds
the two paths equal on generated batches, and fails when this one takes more)."""

from datetime import datetime
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

from config.times import parse_many
from runtime.decision_request import read_amount
from runtime.events import (
    KINDS,
    MAX_COST,
    MAX_EVENTS,
    MAX_FUTURE,
    MAX_PAST,
    MAX_RAW_NAME,
    MAX_TOKENS,
    NEEDS,
    TEXT_FIELDS,
    Event,
    agent_slug,
    attributes_problem,
    timestamp_of,
)

# An event as sent: every field validate_event knows, of the types it takes; None for absent
# or null (validate_event treats a null the same as a missing field, except for the four
# it requires, which cannot be null here).
_Sent = msgspec.defstruct(
    "_Sent",
    [("id", Annotated[str, Meta(min_length=1, max_length=128)]),
     ("agent", Annotated[str, Meta(max_length=MAX_RAW_NAME)]),
     ("ts", str),
     ("kind", Literal[KINDS]),
     *((name, Annotated[str, Meta(max_length=limit)] | None, None)
       for name, limit in TEXT_FIELDS.items()),
     ("amount", Any, None),
     ("input_tokens", Annotated[int, Meta(ge=0, le=MAX_TOKENS)] | None, None),
     ("output_tokens", Annotated[int, Meta(ge=0, le=MAX_TOKENS)] | None, None),
     ("cost", Annotated[float, Meta(ge=0, le=MAX_COST)] | None, None),
     ("attributes", dict[str, Any] | None, None)],
    forbid_unknown_fields=True)
_BATCH = msgspec.json.Decoder(list[_Sent])


def read_batch(body: str, now: datetime) -> list[Event] | None:
    """The events of a JSON-array body when every one of them is valid as of `now`, each as
    validate_event makes it; None when the body is anything else (NDJSON, not JSON, too many
    events, one event that is not valid): then parse_batch and validate_event decide."""
    if "\\u0000" in body:  # a NUL, which validate_event refuses (no database text holds it)
        return None
    try:
        sent = _BATCH.decode(body)
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):  # nested deep
        return None
    if len(sent) > MAX_EVENTS:
        return None
    moments = _moments(sent, now)
    if moments is None:
        return None
    events = []
    for item, moment in zip(sent, moments, strict=True):
        event = _event(item, moment)
        if event is None:
            return None
        events.append(event)
    return events


def _moments(sent: list[Any], now: datetime) -> list[datetime] | None:
    """Each item's time as timestamp_of reads it, None when it refuses one: read all at once
    when they are spelled alike (config/times.parse_many), else one by one."""
    moments = parse_many([item.ts for item in sent])
    if moments is None:
        moments = [timestamp_of(item.ts, now) for item in sent]
        return None if any(isinstance(m, str) for m in moments) else moments
    if moments and (min(moments) < now - MAX_PAST or max(moments) > now + MAX_FUTURE):
        return None  # too old or ahead: timestamp_of says which
    return moments


def _event(item: Any, moment: datetime) -> Event | None:
    """validate_event's event of a decoded item at its time, None where validate_event would
    refuse it."""
    agent = item.agent
    slug = agent_slug(agent)
    if not slug:  # no letters or digits, or too long once made a name
        return None
    kind = item.kind
    if (needed := NEEDS.get(kind)) and not getattr(item, needed):
        return None
    amount = item.amount
    if amount is not None:
        amount = read_amount(amount)
        if isinstance(amount, str):
            return None
    attributes = item.attributes
    if attributes is not None and attributes_problem(attributes):
        return None
    return Event.whole({
        "id": item.id, "agent": slug, "ts": moment, "kind": kind, "tool": item.tool or "",
        "resource": item.resource or "", "record": item.record or "",
        "action": item.action or "", "amount": amount, "approved_by": item.approved_by or "",
        "decision_id": item.decision_id or "", "trace_id": item.trace_id or "",
        "span_id": item.span_id or "", "label": agent if agent != slug else "",
        "model": item.model or "", "operation": item.operation or "",
        "error": item.error or "", "input_tokens": item.input_tokens,
        "output_tokens": item.output_tokens, "cost": item.cost, "attributes": attributes})
