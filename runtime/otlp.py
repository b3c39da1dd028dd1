"""OTLP/HTTP bodies to the OTLP JSON shape: JSON as it is, protobuf (what the OpenTelemetry SDKs'
exporters send) decoded with the official opentelemetry-proto messages."""

import base64
import json
from typing import Any

from google.protobuf.json_format import MessageToDict
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from runtime.events import BatchError


def _hex(value: str) -> str:
    # The protobuf JSON mapping spells bytes as base64; OTLP JSON spells ids as hex.
    return base64.b64decode(value).hex() if value else ""


def decode(body: bytes, *, content_type: str) -> dict[str, Any]:
    """The OTLP payload as a dict in the OTLP JSON shape (config.limits already undid any
    Content-Encoding, within the body limit)."""
    if "protobuf" in content_type:
        try:
            message = ExportTraceServiceRequest.FromString(body)
        except DecodeError as error:
            raise BatchError(f"not an OTLP protobuf ExportTraceServiceRequest: {error}") from None
        payload = MessageToDict(message)
        for resource_spans in payload.get("resourceSpans", []):
            for scope_spans in resource_spans.get("scopeSpans", []):
                for span in scope_spans.get("spans", []):
                    span["traceId"] = _hex(span.get("traceId", ""))
                    span["spanId"] = _hex(span.get("spanId", ""))
        return payload
    try:
        payload = json.loads(body)
    # ValueError: also a number of more than 4,300 digits (Python's limit), and UnicodeDecodeError
    except (ValueError, RecursionError) as error:
        raise BatchError(f"the body is not OTLP JSON: {error}") from None
    if not isinstance(payload, dict):
        raise BatchError("expected an OTLP ExportTraceServiceRequest object")
    return payload
