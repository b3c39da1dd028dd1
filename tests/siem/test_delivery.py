"""The audit and alert stream reaching real local receivers through a real RQ worker: a
syslog server over TLS, an OTLP/HTTP logs receiver and an HTTP (Splunk HEC-style) collector.
Each receiver goes down and comes back; nothing is lost, nothing arrives twice, and every
record carries its seq and hash chained to the one before."""

import ipaddress
import re
from datetime import timedelta

import pytest
from cryptography import x509
from django.db import transaction

from audit.models import AuditChainHead, AuditEntry
from reconciliation import alerts
from registry.choices import Role
from siem.models import AlertStreamHead, Sink
from tests.certificates import self_signed
from tests.conftest import eventually, make_person, postgresql_only
from tests.siem.receivers import (
    HTTPReceiver,
    SyslogTLSReceiver,
    parse_hec,
    parse_otlp,
    port_refuses,
)

pytestmark = [postgresql_only, pytest.mark.timeout(600)]
TOKEN = "hec-token-for-the-test-collector"
WORKER_ENV = {"SIEM_ALLOWED_HOSTS": "127.0.0.1:*", "SIEM_RETRY_MAX_SECONDS": "1",
              "SIEM_RETRY_ATTEMPTS": "2", "SIEM_TIMEOUT_SECONDS": "5",
              "SIEM_TOKEN_COLLECTOR": TOKEN}


def audit_head() -> int:
    return AuditChainHead.objects.get(pk=1).seq


def alert_head() -> int:
    return AlertStreamHead.objects.filter(pk=1).values_list("seq", flat=True).first() or 0


def write_history(prefix: str, people: int = 3, alerts_sent: int = 2) -> None:
    """Audited changes (people created, roles granted) and alerts, as the product makes them."""
    for i in range(people):
        make_person(f"{prefix}{i}", Role.OWNER)
    for i in range(alerts_sent):
        with transaction.atomic():
            alerts.broadcast("agent.silent", {"severity": "medium", "note": f"{prefix}{i}"})


def has_everything(receiver, since: dict[str, int]) -> bool:
    """The receiver holds every seq of both streams after `since`, up to each head."""
    for stream, head in (("audit", audit_head()), ("alert", alert_head())):
        if set(range(since[stream] + 1, head + 1)) - set(receiver.unique(stream)):
            return False
    return True


def assert_whole(receiver, since: dict[str, int], *, exactly_once: bool = True) -> None:
    """Contiguous seqs from where the sink started to each head, each chained by prev_hash to
    the one before; received exactly once unless redelivery is expected."""
    for stream, head in (("audit", audit_head()), ("alert", alert_head())):
        kept = receiver.unique(stream)
        assert sorted(kept) == list(range(since[stream] + 1, head + 1)), stream
        for seq in sorted(kept)[1:]:
            assert kept[seq]["prev_hash"] == kept[seq - 1]["hash"], (stream, seq)
        if exactly_once:
            seqs = receiver.seqs(stream)
            assert len(seqs) == len(set(seqs)), f"{stream} delivered twice"
            assert seqs == sorted(seqs), f"{stream} out of order"
    for seq, record in receiver.unique("audit").items():
        assert AuditEntry.objects.get(seq=seq).hash == record["hash"]


def add_sink(client, name: str, kind: str, url: str, **extra) -> dict:
    response = client.post("/api/v1/siem/sinks", {"name": name, "kind": kind, "url": url,
                                                  **extra}, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def sink_state(name: str) -> dict:
    sink = Sink.objects.get(name=name)
    return {"audit_seq": sink.audit_seq, "alert_seq": sink.alert_seq, "failures": sink.failures,
            "retry_at": str(sink.retry_at), "last_error": sink.last_error,
            "heads": (audit_head(), alert_head())}


def outage(receiver, port: int, since: dict[str, int], sink_name: str, worker) -> None:
    """Stop the receiver, write history it misses, see the sink fail, bring it back, and see
    it catch up with everything once."""
    receiver.stop()
    assert port_refuses(port)
    write_history(f"{sink_name}-out", people=2, alerts_sent=2)
    eventually(lambda: Sink.objects.get(name=sink_name).failures > 0,
               message=lambda: f"the {sink_name} sink never noticed the outage")
    assert Sink.objects.get(name=sink_name).last_error
    receiver.start()
    eventually(lambda: has_everything(receiver, since), timeout=120,
               message=lambda: f"{sink_name} did not catch up: "
                               f"{sorted(receiver.unique('audit'))[-3:]} {sink_state(sink_name)}"
                               f"\nworker said:\n{worker.output()[-6000:]}")
    eventually(lambda: Sink.objects.get(name=sink_name).failures == 0)
    assert_whole(receiver, since)


def test_each_receiver_survives_an_outage_with_nothing_lost_or_twice(
        people, api_as, start_worker, tmp_path):
    cert, key = self_signed(tmp_path, "localhost",
                            x509.IPAddress(ipaddress.ip_address("127.0.0.1")))
    syslog = SyslogTLSReceiver(cert, key).start()
    otlp = HTTPReceiver("/v1/logs", parse_otlp).start()
    hec = HTTPReceiver("/services/collector/event", parse_hec, token=TOKEN).start()
    admin = api_as(people.admin)
    made = [add_sink(admin, "soc-syslog", "syslog", f"syslog+tls://127.0.0.1:{syslog.port}",
                     ca_pem=cert.read_text()),
            add_sink(admin, "soc-otlp", "otlp", f"http://127.0.0.1:{otlp.port}"),
            add_sink(admin, "soc-hec", "http", hec.url, token_env="SIEM_TOKEN_COLLECTOR")]
    # Each sink starts after what was sequenced when it was made (its own entry is the next).
    since = [{stream: sink["streams"][stream]["delivered_seq"] for stream in ("audit", "alert")}
             for sink in made]
    receivers = list(zip((syslog, otlp, hec), since, strict=True))
    worker = start_worker("default", **WORKER_ENV)

    write_history("before")
    for receiver, start in receivers:
        eventually(lambda r=receiver, s=start: has_everything(r, s), timeout=120)
        assert_whole(receiver, start)

    for (receiver, start), sink in zip(receivers, made, strict=True):
        outage(receiver, receiver.port, start, sink["name"], worker)
    for receiver, start in receivers:
        eventually(lambda r=receiver, s=start: has_everything(r, s), timeout=120)
        assert_whole(receiver, start)

    message = syslog.messages[0]
    assert re.match(rb"<11\d>1 \S+ \S+ agentgov - (audit|alert) \[agentgov@32473 stream=", message)
    assert hec.headers[0]["Authorization"] == f"Splunk {TOKEN}"
    status = admin.get("/api/v1/siem/sinks").json()
    assert {s["name"]: s["streams"]["audit"]["lag"] for s in status["sinks"]} == {
        "soc-hec": 0, "soc-otlp": 0, "soc-syslog": 0}


def test_a_worker_killed_mid_batch_redelivers_only_that_batch(
        people, api_as, start_worker):
    hec = HTTPReceiver("/collector", parse_hec).start()
    hec.hold_request = 2  # the second batch is taken and never answered: the worker dies
    admin = api_as(people.admin)
    made = add_sink(admin, "soc", "http", hec.url)
    since = {stream: made["streams"][stream]["delivered_seq"] for stream in ("audit", "alert")}
    worker = start_worker("default", SIEM_BATCH_SIZE="3", **WORKER_ENV)
    write_history("batch", people=4, alerts_sent=0)
    assert hec.held.wait(120), "the second batch never arrived"
    held = hec.requests[1]
    worker.kill()
    hec.release.set()
    assert Sink.objects.get(name="soc").audit_seq == held[0][1] - 1  # not moved past it

    start_worker("default", SIEM_BATCH_SIZE="3", **WORKER_ENV)
    write_history("after", people=1, alerts_sent=1)  # a commit kicks delivery again
    eventually(lambda: has_everything(hec, since), timeout=120)
    assert_whole(hec, since, exactly_once=False)
    seqs = hec.seqs("audit")
    twice = sorted({seq for seq in seqs if seqs.count(seq) > 1})
    assert twice == [seq for _, seq in held]  # only the batch in flight, once more


def test_a_sink_is_configured_by_admins_only_and_checked(people, api_as):
    admin, dana = api_as(people.admin), api_as(people.dana)
    refused = dana.post("/api/v1/siem/sinks", {"name": "x", "kind": "http",
                                               "url": "http://127.0.0.1:9/"}, format="json")
    assert refused.status_code == 403
    bad = admin.post("/api/v1/siem/sinks", {"name": "x", "kind": "syslog",
                                            "url": "http://127.0.0.1:9/"}, format="json")
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_sink"
    secret = admin.post("/api/v1/siem/sinks", {"name": "x", "kind": "http", "token_env":
                                               "SECRET_KEY", "url": "http://127.0.0.1:9/"},
                        format="json")
    assert secret.status_code == 400
    assert not Sink.objects.exists()
    made = add_sink(admin, "x", "http", "http://127.0.0.1:9/")
    assert dana.get("/api/v1/siem/sinks").json()["sinks"][0]["name"] == "x"
    assert dana.patch(f"/api/v1/siem/sinks/{made['id']}", {"enabled": False},
                      format="json").status_code == 403
    assert admin.patch(f"/api/v1/siem/sinks/{made['id']}", {"enabled": False},
                       format="json").json()["enabled"] is False
    assert AuditEntry.objects.filter(action="siem.sink_changed").exists()
    assert admin.delete(f"/api/v1/siem/sinks/{made['id']}").status_code == 204
    assert admin.get(f"/api/v1/siem/sinks/{made['id']}").status_code == 404


def test_a_retry_that_runs_before_the_backoff_ends_is_put_off_never_dropped(
        people, api_as, redis_client):
    """RQ's scheduler keeps whole seconds and another worker's clock may be behind: a retry
    that runs early must leave a retry scheduled no earlier than the sink's retry_at (a
    dropped one left a sink behind until the periodic run, found by the outage test)."""
    import django_rq
    from django.utils import timezone
    from rq.registry import ScheduledJobRegistry

    from siem import delivery

    made = add_sink(api_as(people.admin), "soc", "http", "http://127.0.0.1:9/")
    retry_at = timezone.now() + timedelta(seconds=30, microseconds=400_000)
    Sink.objects.filter(pk=made["id"]).update(failures=1, retry_at=retry_at)

    assert delivery.retry_after_backoff(made["id"]) == 0  # early: nothing sent
    queue = django_rq.get_queue("default")
    scheduled = ScheduledJobRegistry(queue=queue)
    (job_id,) = scheduled.get_job_ids()
    assert queue.fetch_job(job_id).func_name == "siem.jobs.retry"
    runs_at = scheduled.get_scheduled_time(job_id)
    assert runs_at >= retry_at and runs_at - retry_at < timedelta(seconds=1)
    assert Sink.objects.get(pk=made["id"]).failures == 1  # the failure is not forgotten
