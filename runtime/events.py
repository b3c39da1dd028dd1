"""Behaviour events in: parsing a batch (JSON array or NDJSON), validating each event, and
mapping OpenTelemetry GenAI spans (OTLP JSON) to events. Pure Python.

Each event stands alone: a bad one is rejected with its reason while the rest are accepted.
"""

import json
import math
import re
from dataclasses import MISSING, asdict, dataclass, fields
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any

from django.utils.text import slugify

from config.times import NoZone, parse_timestamp
from config.unicode_text import NOT_TEXT, is_text
from runtime.decision_request import read_amount

KINDS = ("tool_call", "data_access", "action", "model_call", "agent_invocation")
MAX_EVENTS = 5000
MAX_PAST = timedelta(days=30)
MAX_FUTURE = timedelta(minutes=5)
NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
MAX_RAW_NAME = 256  # longest display name kept for an agent ("Math Tutor")
SEPARATORS = re.compile(r"[\s_./:@]+")
TEXT_FIELDS = {"tool": 128, "resource": 256, "record": 256, "action": 128, "approved_by": 150,
               "decision_id": 64, "trace_id": 64, "span_id": 32, "model": 128, "operation": 32,
               "error": 128}
COUNT_FIELDS = ("input_tokens", "output_tokens")
MAX_ATTRIBUTES = 64
MAX_TOKENS = 10**12  # input_tokens, output_tokens
MAX_COST = 1e12
NEEDS = {"action": "action", "data_access": "resource", "tool_call": "tool"}  # kind: field
MAX_ATTRIBUTE_TEXT = 512
FIELDS = {"id", "agent", "ts", "kind", "amount", "cost", "attributes", *COUNT_FIELDS,
          *TEXT_FIELDS}


class BatchError(ValueError):
    """The body as a whole cannot be read (not one event could be taken from it)."""


@dataclass(frozen=True)
class Event:
    """One validated behaviour event."""

    id: str
    agent: str
    ts: datetime
    kind: str
    tool: str = ""
    resource: str = ""
    record: str = ""
    action: str = ""
    amount: float | None = None
    approved_by: str = ""
    decision_id: str = ""
    trace_id: str = ""
    span_id: str = ""
    label: str = ""  # the agent's name as sent, when it was not already a slug
    # GenAI usage (OpenTelemetry gen_ai.*): the model, tokens, cost, the operation, an error,
    # and the attributes nothing here maps (kept as sent).
    model: str = ""
    operation: str = ""
    error: str = ""
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost: float | None = None
    attributes: dict[str, Any] | None = None

    @classmethod
    def of(cls, **values: Any) -> "Event":
        """Event(**values) for ingest's hot path: the same frozen, equal and hashable event,
        made without the frozen __init__'s one object.__setattr__ per field (a quarter of a
        1,000-event batch's validation)."""
        event = object.__new__(cls)
        event.__dict__.update(_EVENT_DEFAULTS, **values)
        return event

    @classmethod
    def whole(cls, values: dict[str, Any]) -> "Event":
        """The event of a dict that names every field (ingest's fast path): as `of`, without
        merging the defaults in or passing the fields as keywords (2.6 -> 0.4 us an event)."""
        event = object.__new__(cls)
        event.__dict__.update(values)
        return event

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["ts"] = self.ts.isoformat()
        return data


_EVENT_DEFAULTS = {f.name: f.default for f in fields(Event) if f.default is not MISSING}


def parse_batch(body: str, *, ndjson: bool) -> list[Any]:
    """The items of a batch: a JSON array, or one JSON value per line (NDJSON)."""
    if ndjson:
        items = []
        for number, line in enumerate(body.splitlines(), start=1):
            if line.strip():
                try:
                    items.append(json.loads(line))
                except json.JSONDecodeError as error:
                    items.append(ParseFailure(f"line {number} is not JSON: {error.msg}"))
                except ValueError as error:  # a number of more than 4,300 digits
                    items.append(ParseFailure(f"line {number} is not JSON: {error}"))
                except RecursionError:
                    items.append(ParseFailure(f"line {number} is nested too deeply"))
    else:
        try:
            items = json.loads(body)
        except json.JSONDecodeError as error:
            raise BatchError(f"the body is not JSON: {error.msg} at line {error.lineno}") from None
        except ValueError as error:  # a number of more than 4,300 digits (Python's limit)
            raise BatchError(f"the body is not JSON: {error}") from None
        except RecursionError:
            raise BatchError("the body is nested too deeply") from None
        if not isinstance(items, list):
            raise BatchError("expected a JSON array of events (or NDJSON)")
    if len(items) > MAX_EVENTS:
        raise BatchError(f"at most {MAX_EVENTS} events per batch; got {len(items)}")
    return items


@dataclass(frozen=True)
class ParseFailure:
    """An NDJSON line that could not be parsed."""

    reason: str


def timestamp_of(value: Any, now: datetime) -> datetime | str:
    """An event's time in UTC, or why it is refused (no zone, not RFC 3339, too old, ahead)."""
    if not isinstance(value, str):
        return "ts must be an RFC 3339 string with a zone"
    try:
        moment = parse_timestamp(value)
    except NoZone:
        return "ts has no zone"
    except ValueError:
        return "ts must be an RFC 3339 string with a zone"
    if moment < now - MAX_PAST:
        return f"ts is more than {MAX_PAST.days} days in the past"
    if moment > now + MAX_FUTURE:
        return "ts is in the future"
    return moment.astimezone(UTC)


def validate_event(raw: Any, now: datetime) -> Event | str:
    """A validated event, or the reason it is rejected."""
    if isinstance(raw, ParseFailure):
        return raw.reason
    if not isinstance(raw, dict):
        return "expected a JSON object"
    if not FIELDS.issuperset(raw):
        return f"unknown field {sorted(set(raw) - FIELDS)[0]!r}"
    event_id = raw.get("id")
    if not isinstance(event_id, str) or not 1 <= len(event_id) <= 128:
        return "id must be a string of 1 to 128 characters"
    if not is_text(event_id):
        return f"id {NOT_TEXT}"
    agent = raw.get("agent")
    if not isinstance(agent, str) or not agent.strip():
        return "agent must be an agent name (lowercase letters, digits, '-')"
    if len(agent) > MAX_RAW_NAME:
        return f"agent must be at most {MAX_RAW_NAME} characters"
    if not is_text(agent):
        return f"agent {NOT_TEXT}"
    slug = agent_slug(agent)
    if not slug:
        return (f"agent {agent[:80]!r} has no letters or digits to make an agent name of"
                if not _slugged(agent) else
                f"agent {agent[:80]!r} makes an agent name longer than 63 characters")
    if raw.get("kind") not in KINDS:
        return f"kind must be one of {', '.join(KINDS)}"
    moment = timestamp_of(raw.get("ts"), now)
    if isinstance(moment, str):
        return moment
    texts = {}
    for field, limit in TEXT_FIELDS.items():
        value = raw.get(field)
        if value is None:
            continue
        if not isinstance(value, str) or len(value) > limit:
            return f"{field} must be a string of at most {limit} characters"
        if not is_text(value):
            return f"{field} {NOT_TEXT}"
        texts[field] = value
    amount = raw.get("amount")
    if amount is not None:  # read as every gate reads it (runtime/decision_request.py)
        amount = read_amount(amount)
        if isinstance(amount, str):
            return f"amount cannot be read: {amount}"
    usage = _usage(raw)
    if isinstance(usage, str):
        return usage
    if (needed := NEEDS.get(raw["kind"])) and not texts.get(needed):
        return f"{'an' if raw['kind'] == 'action' else 'a'} {raw['kind']} event needs its {needed}"
    return Event.of(id=event_id, agent=slug, ts=moment, kind=raw["kind"],
                    amount=amount,
                    label=agent if agent != slug else "", **usage, **texts)


def _usage(raw: dict[str, Any]) -> dict[str, Any] | str:
    """Tokens, cost and unmapped attributes of an event, or why they are rejected."""
    usage: dict[str, Any] = {}
    for field in COUNT_FIELDS:
        value = raw.get(field)
        if value is None:
            continue
        if not token_count(value):
            return f"{field} {TOKENS_EXPECTED}"
        usage[field] = value
    cost = raw.get("cost")
    if cost is not None:
        if not cost_value(cost):
            return f"cost {COST_EXPECTED}"
        usage["cost"] = float(cost)
    attributes = raw.get("attributes")
    if attributes is not None:
        if problem := attributes_problem(attributes):
            return problem
        usage["attributes"] = attributes
    return usage


def attributes_problem(attributes: Any) -> str:
    """Why an event's attributes are refused ("" when they are kept)."""
    if not isinstance(attributes, dict) or len(attributes) > MAX_ATTRIBUTES:
        return f"attributes must be an object of at most {MAX_ATTRIBUTES} entries"
    for key, value in attributes.items():
        if len(key) > 128 or not (value is None or isinstance(value, bool | int)
                                  or (isinstance(value, float) and math.isfinite(value))
                                  or (isinstance(value, str)
                                      and len(value) <= MAX_ATTRIBUTE_TEXT)):
            return (f"attributes values must be numbers, booleans or strings of at most "
                    f"{MAX_ATTRIBUTE_TEXT} characters (key at most 128)")
        if not is_text(key) or (isinstance(value, str) and not is_text(value)):
            return f"attributes {NOT_TEXT}"
    return ""

    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True


TOKENS_EXPECTED = "must be an integer between 0 and 1e12"
COST_EXPECTED = "must be a number between 0 and 1e12"


def token_count(value: Any) -> bool:
    """Whether a token count is one ingest keeps: an integer from 0 to 1e12."""
    return not isinstance(value, bool) and isinstance(value, int) and 0 <= value <= MAX_TOKENS


def cost_value(value: Any) -> bool:
    """Whether a cost is one ingest keeps: a finite number from 0 to 1e12."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    # An int is compared as it is: math.isfinite(10**400) overflows converting it to a float.
    return 0 <= value <= MAX_COST and (isinstance(value, int) or math.isfinite(value))


def _slugged(name: str) -> str:
    return slugify(SEPARATORS.sub("-", name)).strip("-")


@lru_cache(maxsize=4096)  # a batch names a few agents many times
def agent_slug(name: str) -> str:
    """The registry's spelling of an agent name: a slug as it is, anything else normalised the
    way telemetry names need ("Math Tutor" -> "math-tutor", "support_bot" -> "support-bot");
    "" when nothing usable is left (no letters or digits, or longer than 63 characters)."""
    if NAME.match(name):
        return name
    slug = _slugged(name)
    return slug if NAME.match(slug) else ""


# --- OpenTelemetry -------------------------------------------------------------------------


MAX_UNIX_NANO = 253402300799 * 10**9  # 9999-12-31T23:59:59Z, the last moment datetime holds


class ShapeError(BatchError):
    """An OTLP body whose structure is not the ExportTraceServiceRequest's, with where."""

    def __init__(self, pointer: str, expected: str) -> None:
        self.pointer = pointer
        super().__init__(f"{pointer or '/'}: expected {expected}")


def _list(value: Any, pointer: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ShapeError(pointer, "an array")
    return value


def _object(value: Any, pointer: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ShapeError(pointer, "an object")
    return value


def _attribute_value(value: dict[str, Any], pointer: str) -> Any:
    for key in ("stringValue", "intValue", "doubleValue", "boolValue"):
        if key not in value:
            continue
        found = value[key]
        if key == "intValue":  # int64, spelled as a JSON number or a decimal string
            if isinstance(found, bool) or not isinstance(found, int | str):
                raise ShapeError(f"{pointer}/intValue", "an integer")
            try:
                return int(found)
            except ValueError:
                raise ShapeError(f"{pointer}/intValue", "an integer") from None
        if key == "doubleValue" and (isinstance(found, bool)
                                     or not isinstance(found, int | float | str)):
            raise ShapeError(f"{pointer}/doubleValue", "a number")
        if key == "stringValue" and not isinstance(found, str):
            raise ShapeError(f"{pointer}/stringValue", "a string")
        if key == "boolValue" and not isinstance(found, bool):
            raise ShapeError(f"{pointer}/boolValue", "true or false")
        return found
    return None


def _attributes(items: Any, pointer: str) -> dict[str, Any]:
    attributes = {}
    for index, item in enumerate(_list(items, pointer)):
        at = f"{pointer}/{index}"
        item = _object(item, at)
        if not isinstance(item.get("key"), str):
            raise ShapeError(f"{at}/key", "a string")
        attributes[item["key"]] = _attribute_value(_object(item.get("value"), f"{at}/value"),
                                                   f"{at}/value")
    return attributes


def _start_time(span: dict[str, Any], pointer: str) -> datetime:
    start = span.get("startTimeUnixNano")
    start = 0 if start is None or start == "" else start
    at = f"{pointer}/startTimeUnixNano"
    if isinstance(start, bool) or not isinstance(start, int | str):
        raise ShapeError(at, "nanoseconds since 1970 as an integer or a decimal string")
    try:
        nanos = int(start)
    except ValueError:
        raise ShapeError(at, "nanoseconds since 1970 as an integer or a decimal string") from None
    if not 0 <= nanos <= MAX_UNIX_NANO:
        raise ShapeError(at, "nanoseconds between 1970 and the year 9999")
    return datetime.fromtimestamp(nanos / 1e9, UTC)


def _span_id(span: dict[str, Any], key: str, pointer: str) -> str:
    value = span.get(key)
    value = "" if value is None else value
    if not isinstance(value, str):
        raise ShapeError(f"{pointer}/{key}", "a hex string")
    return value


# gen_ai.operation.name -> event kind (the GenAI semantic conventions' operations).
OPERATION_KINDS = {"execute_tool": "tool_call", "chat": "model_call",
                   "text_completion": "model_call", "generate_content": "model_call",
                   "embeddings": "model_call", "invoke_agent": "agent_invocation",
                   "create_agent": "agent_invocation", "invoke_workflow": "agent_invocation"}
# Attributes mapped onto an event's own fields (the rest are kept in `attributes`).
MAPPED = {"gen_ai.operation.name", "gen_ai.agent.name", "gen_ai.agent.id", "gen_ai.tool.name",
          "gen_ai.response.model", "gen_ai.usage.input_tokens",
          "gen_ai.usage.output_tokens", "gen_ai.usage.cost", "error.type",
          *(f"governance.{f}" for f in ("resource", "record", "action", "amount",
                                        "approved_by", "decision_id", "cost"))}
ERROR_CODES = (2, "2", "STATUS_CODE_ERROR")


def _span_error(span: dict[str, Any], attrs: dict[str, Any], pointer: str) -> str:
    """error.type, else the span's error status (its message, or "error")."""
    if attrs.get("error.type"):
        return str(attrs["error.type"])[:128]
    status = _object(span.get("status"), f"{pointer}/status")
    if status.get("code") in ERROR_CODES:
        return str(status.get("message") or "error")[:128]
    return ""


def _kept(attrs: dict[str, Any]) -> dict[str, Any]:
    """The span's attributes nothing maps, within the event's bounds."""
    kept = {}
    for key, value in sorted(attrs.items()):
        if key in MAPPED or len(kept) >= MAX_ATTRIBUTES or len(key) > 128:
            continue
        if isinstance(value, str):
            value = value[:MAX_ATTRIBUTE_TEXT]
        elif isinstance(value, float) and not math.isfinite(value):
            continue
        kept[key] = value
    return kept


def _usage_of(attrs: dict[str, Any], pointer: str, dropped: list[str]) -> dict[str, Any]:
    """A span's token counts and cost within /api/v1/events' limits; each value outside them is
    left out of the event and said in `dropped` (the export's partialSuccess reports it)."""
    usage: dict[str, Any] = {}
    for field in COUNT_FIELDS:
        key = f"gen_ai.usage.{field}"
        value = attrs.get(key)
        if value is None:
            continue
        if isinstance(value, float) and value.is_integer() or (
                isinstance(value, str) and value.isascii() and value.isdigit()):
            value = int(value)  # a doubleValue of a whole count, or a count as a string
        if token_count(value):
            usage[field] = value
        else:
            dropped.append(f"{pointer} {key}={_shown(value)} dropped: {TOKENS_EXPECTED}")
    key = "gen_ai.usage.cost" if "gen_ai.usage.cost" in attrs else "governance.cost"
    cost = attrs.get(key)
    if isinstance(cost, str):  # a doubleValue spelled as a string
        try:
            cost = float(cost)
        except ValueError:
            pass
    if cost is not None:
        if cost_value(cost):
            usage["cost"] = cost
        else:
            dropped.append(f"{pointer} {key}={_shown(attrs.get(key))} dropped: {COST_EXPECTED}")
    return usage


def _shown(value: Any) -> str:
    return repr(value)[:40]


def spans_to_events(payload: Any, dropped: list[str] | None = None) -> list[dict[str, Any]]:
    """OTLP trace data (JSON encoding) to raw events by the GenAI semantic conventions:
    `execute_tool` spans become tool calls (gen_ai.tool.name), model operations (`chat`,
    `text_completion`, `generate_content`, `embeddings`) model calls with the request and
    response model, `invoke_agent` (and `create_agent`, `invoke_workflow`) agent invocations;
    each keeps its token usage (gen_ai.usage.input_tokens/output_tokens), cost where present
    (gen_ai.usage.cost or governance.cost), its error (error.type or an error status) and
    every attribute nothing maps. `governance.*` attributes add resource, record, action and
    amount (a span with governance.action becomes an action event). Other spans are ignored.
    The agent is gen_ai.agent.name, else gen_ai.agent.id, else service.name. The event id is
    the span's trace and span id, so a re-sent export is a repeat. A body not shaped as an
    ExportTraceServiceRequest raises ShapeError naming where. A usage value outside ingest's
    limits (negative, over 1e12, not a number) is left out, and said in `dropped`."""
    dropped = [] if dropped is None else dropped
    events = []
    payload = _object(payload, "")
    for i, resource_spans in enumerate(_list(payload.get("resourceSpans"), "/resourceSpans")):
        p = f"/resourceSpans/{i}"
        resource_spans = _object(resource_spans, p)
        resource = _object(resource_spans.get("resource"), f"{p}/resource")
        resource_attrs = _attributes(resource.get("attributes"), f"{p}/resource/attributes")
        for j, scope_spans in enumerate(_list(resource_spans.get("scopeSpans"),
                                              f"{p}/scopeSpans")):
            q = f"{p}/scopeSpans/{j}"
            scope_spans = _object(scope_spans, q)
            for k, span in enumerate(_list(scope_spans.get("spans"), f"{q}/spans")):
                r = f"{q}/spans/{k}"
                span = _object(span, r)
                own = _attributes(span.get("attributes"), f"{r}/attributes")
                attrs = {**resource_attrs, **own}
                trace_id, span_id = _span_id(span, "traceId", r), _span_id(span, "spanId", r)
                start = _start_time(span, r)
                operation = attrs.get("gen_ai.operation.name")
                kind = OPERATION_KINDS.get(operation) if isinstance(operation, str) else None
                if kind is None and "governance.action" not in attrs:
                    continue
                agent = (attrs.get("gen_ai.agent.name") or attrs.get("gen_ai.agent.id")
                         or attrs.get("service.name"))
                event: dict[str, Any] = {
                    "id": f"otel-{trace_id}-{span_id}",
                    "agent": agent,
                    "ts": start.isoformat(),
                    "kind": kind or "tool_call",
                    "trace_id": trace_id,
                    "span_id": span_id,
                }
                if isinstance(operation, str) and operation:
                    event["operation"] = operation[:32]
                if attrs.get("gen_ai.tool.name"):
                    event["tool"] = attrs["gen_ai.tool.name"]
                model = attrs.get("gen_ai.response.model") or attrs.get("gen_ai.request.model")
                if model:
                    event["model"] = str(model)[:128]
                event.update(_usage_of(attrs, r, dropped))
                if error := _span_error(span, attrs, r):
                    event["error"] = error
                for field in ("resource", "record", "action", "amount", "approved_by",
                              "decision_id"):
                    if f"governance.{field}" in attrs:
                        event[field] = attrs[f"governance.{field}"]
                if kept := _kept(own):
                    event["attributes"] = kept
                if "action" in event:
                    event["kind"] = "action"
                elif "resource" in event and "tool" not in event and kind in (None,
                                                                              "tool_call"):
                    event["kind"] = "data_access"
                events.append(event)
    return events
