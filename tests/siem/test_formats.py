"""The wire formats as plain functions: exact framing a receiver can parse."""

import json

from siem import formats
from tests.siem.receivers import frames, parse_hec, parse_otlp

RECORD = {"stream": "audit", "seq": 7, "hash": "ab" * 32, "prev_hash": "cd" * 32,
          "at": "2026-12-02T09:00:00.000001Z", "action": "proposal.approved", "actor": "bob",
          "reason": 'quote " and ] and \\ and ünïcode'}


def test_syslog_is_rfc5424_in_octet_counted_frames():
    batch = formats.syslog_batch([RECORD, {**RECORD, "seq": 8}], "cp-1")
    first, second = frames(batch)
    assert batch.startswith(str(len(first)).encode() + b" <110>1 2026-12-02T09:00:00.000001Z "
                                                      b"cp-1 agentgov - audit [agentgov@32473 ")
    assert b'stream="audit" seq="7" hash="' + b"ab" * 32 + b'" prev_hash="' in first
    body = first[first.index(b"\xef\xbb\xbf") + 3:]
    assert json.loads(body) == RECORD  # byte lengths, not characters, frame the message
    assert json.loads(second[second.index(b"\xef\xbb\xbf") + 3:])["seq"] == 8


def test_alert_severity_sets_the_syslog_and_otlp_severity():
    alert = {**RECORD, "stream": "alert", "severity": "high", "event": "breaker.tripped"}
    assert formats.syslog_message(alert, "cp-1").startswith(b"<107>1 ")
    log = json.loads(formats.otlp_logs([alert], "cp-1"))["resourceLogs"][0]["scopeLogs"][0][
        "logRecords"][0]
    assert (log["severityNumber"], log["severityText"]) == (17, "ERROR")
    assert {"key": "event.name", "value": {"stringValue": "breaker.tripped"}} in log["attributes"]


def test_otlp_and_hec_carry_the_record_whole():
    assert parse_otlp(formats.otlp_logs([RECORD], "cp-1")) == [RECORD]
    assert parse_hec(formats.hec_batch([RECORD, RECORD], "cp-1")) == [RECORD, RECORD]
