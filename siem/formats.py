"""What each kind of sink is sent: pure functions from stream records to bytes, no Django.

A record is a JSON-safe dict with at least `stream`, `seq`, `hash`, `prev_hash` and `at`; the
receiving side detects a gap when a stream's seq is not one more than the last it kept (or
the prev_hash is not the last hash), and drops a seq it already has (delivery is at least
once)."""

import json
from typing import Any

from config.times import parse_timestamp

APP_NAME = "agentgov"
# RFC 5424 structured-data id: name@<private enterprise number>; 32473 is the number RFC 5612
# reserves for documentation, so no real enterprise's namespace is taken.
SD_ID = "agentgov@32473"
FACILITY_LOG_AUDIT = 13
SEVERITY_NUMBER = {"high": 3, "medium": 4, "low": 5}  # syslog: error, warning, notice
OTLP_SEVERITY = {"high": (17, "ERROR"), "medium": (13, "WARN"), "low": (9, "INFO")}


def _compact(record: dict[str, Any]) -> str:
    return json.dumps(record, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def _unix_nanos(at: str) -> int:
    return int(parse_timestamp(at).timestamp() * 1_000_000_000)


def _sd_value(value: Any) -> str:
    """An SD-PARAM value with RFC 5424's three escapes."""
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("]", "\\]")


def syslog_message(record: dict[str, Any], hostname: str) -> bytes:
    """One RFC 5424 message: facility log audit, severity from the alert (info for audit),
    MSGID the stream, the seq and hashes as structured data, the record as JSON (UTF-8, BOM)."""
    severity = SEVERITY_NUMBER.get(str(record.get("severity") or ""), 6)
    pri = FACILITY_LOG_AUDIT * 8 + severity
    params = " ".join(f'{key}="{_sd_value(record.get(key) or "")}"'
                      for key in ("stream", "seq", "hash", "prev_hash"))
    header = f"<{pri}>1 {record['at']} {hostname or '-'} {APP_NAME} - {record['stream']}"
    return f"{header} [{SD_ID} {params}] ".encode() + b"\xef\xbb\xbf" + _compact(record).encode()


def octet_counted(message: bytes) -> bytes:
    """RFC 6587 / RFC 5425 framing: the message's length in octets, a space, the message."""
    return str(len(message)).encode() + b" " + message


def syslog_batch(records: list[dict[str, Any]], hostname: str) -> bytes:
    return b"".join(octet_counted(syslog_message(r, hostname)) for r in records)


def _any_value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}  # OTLP/JSON carries 64-bit integers as strings
    return {"stringValue": "" if value is None else str(value)}


def otlp_logs(records: list[dict[str, Any]], hostname: str) -> bytes:
    """An OTLP/HTTP JSON ExportLogsServiceRequest: one log record per stream record, the
    record as the body, its stream, seq and hashes as attributes."""
    logs = []
    for record in records:
        number, text = OTLP_SEVERITY.get(str(record.get("severity") or ""), (9, "INFO"))
        attributes = {"agentgov.stream": record["stream"], "agentgov.seq": record["seq"],
                      "agentgov.hash": record["hash"], "agentgov.prev_hash": record["prev_hash"],
                      "event.name": record.get("event") or record.get("action") or ""}
        logs.append({
            "timeUnixNano": str(_unix_nanos(record["at"])),
            "severityNumber": number,
            "severityText": text,
            "body": {"stringValue": _compact(record)},
            "attributes": [{"key": k, "value": _any_value(v)} for k, v in attributes.items()],
        })
    request = {"resourceLogs": [{
        "resource": {"attributes": [
            {"key": "service.name", "value": {"stringValue": APP_NAME}},
            {"key": "host.name", "value": {"stringValue": hostname}},
        ]},
        "scopeLogs": [{"scope": {"name": "agentgov.siem"}, "logRecords": logs}],
    }]}
    return json.dumps(request, separators=(",", ":")).encode()


def hec_batch(records: list[dict[str, Any]], hostname: str) -> bytes:
    """A Splunk HEC-style batch: one JSON event object after another, newline separated."""
    return b"\n".join(json.dumps({
        "time": _unix_nanos(record["at"]) / 1_000_000_000,
        "host": hostname,
        "source": APP_NAME,
        "sourcetype": f"{APP_NAME}:{record['stream']}",
        "event": record,
    }, separators=(",", ":"), sort_keys=True).encode() for record in records)
