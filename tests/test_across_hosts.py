"""The production topology across hosts: workers, web processes and the stores each on a host
of their own (Linux network namespaces, see tests/netns.py), and the network between them cut
and restored while work is under way."""

import json
import threading
import time

import django_rq
import pytest
from django.conf import settings
from django.db import connection, connections
from django.test import Client
from rq import Worker as RQWorker
from websockets.exceptions import ConnectionClosed, InvalidHandshake
from websockets.sync import client as ws_client

from reconciliation.alerts import subscription_for, wanted_filter
from reconciliation.controller.triggers import enqueue_reconcile
from reconciliation.models import AlertEvent, Correction, Finding, ReconcileRun
from sandbox import actions as sandbox_actions
from sandbox.models import SandboxAgent
from tests.conftest import BAD_DEPLOYMENT, approved_agent, assert_trail_whole, eventually
from tests.netns import Host, HostedCluster

# The hosts have fixed names and addresses: the suite's `--dist loadscope` keeps a module on
# one xdist worker, so its tests never run at once.
pytestmark = [pytest.mark.netns, pytest.mark.long(minutes=6)]

# A cut worker's lock lapses after RECONCILE_LOCK_SECONDS; PostgreSQL ends a session it left
# inside a transaction (holding row locks) after DATABASE_IDLE_IN_TRANSACTION_SECONDS, and the
# worker learns it from its keepalive probes within about twice DATABASE_KEEPALIVE_SECONDS.
HOST_SETTINGS = {"RECONCILE_LOCK_SECONDS": "20", "DATABASE_IDLE_IN_TRANSACTION_SECONDS": "10",
                 "DATABASE_KEEPALIVE_SECONDS": "6", "RECONCILE_VERIFY_DELAY_SECONDS": "1"}


def until(cluster: HostedCluster, hosts: list[Host], check, what: str, timeout: float = 240):
    """`eventually`, failing with what the hosts printed."""
    try:
        return eventually(check, timeout=timeout)
    except AssertionError:
        logs = "\n".join(f"--- {host.name}:\n{cluster.output(host)}" for host in hosts)
        raise AssertionError(f"{what} within {timeout}s\n{logs}") from None


def statuses(agent) -> list[str]:
    return sorted(Finding.objects.filter(agent=agent).values_list("status", flat=True))


def waiting_on_a_row_lock(host: Host) -> bool:
    """A session of `host` waits for a row lock."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                       " AND application_name = %s AND wait_event_type = 'Lock'",
                       [f"netns-{host.name}"])
        return cursor.fetchone()[0] > 0


def idle(host: Host) -> bool:
    """The RQ worker on `host` is registered and runs no job."""
    workers = RQWorker.all(connection=django_rq.get_connection("reconcile"))
    return any(w.pid == host.processes[-1].pid and w.get_state() == "idle" for w in workers)


def supervised(cluster: HostedCluster, host: Host, check):
    """`check`, with the worker on `host` started again each time it is found ended (every
    process of the host gone), as a process supervisor keeps a worker running."""
    def check_supervised():
        if host.processes[-1].poll() is not None and not cluster.network.pids(host):
            cluster.start_worker(host, **HOST_SETTINGS)
        return check()
    return check_supervised


@pytest.mark.timeout(900)
def test_a_worker_cut_off_mid_pass_loses_its_lock_and_another_finishes_the_pass_once(
        people, hosted_cluster):
    agent = approved_agent(people, "refund-agent", enforcement={"default": "correct"})
    sandbox_actions.ensure_sandbox(agent)
    sandbox_actions.sandbox_deploy(agent, actor="system:test", changes=BAD_DEPLOYMENT,
                           reason="a deployment quietly widened access")
    # The platform's row is held, so the first worker's pass stops at its first change:
    # mid-pass, its findings recorded, inside a transaction of its own on the platform's row.
    holder = connections.create_connection("default")
    holder.set_autocommit(False)
    with holder.cursor() as cursor:
        cursor.execute("SELECT 1 FROM reconciliation_sandboxagent WHERE agent_id = %s "
                       "FOR UPDATE", [agent.pk])
    first = hosted_cluster.worker("worker-1", **HOST_SETTINGS)
    try:
        until(hosted_cluster, [first], lambda: waiting_on_a_row_lock(first),
              "the pass never reached its first change", timeout=120)
        hosted_cluster.network.cut(first)
    finally:
        holder.commit()  # the cut worker's session takes the row, and cannot be told
        holder.close()
    assert len(statuses(agent)) == 3 and SandboxAgent.objects.get(agent=agent).apply_count == 0

    second = hosted_cluster.worker("worker-2", **HOST_SETTINGS)
    # The next trigger (a resync, an observation) finds the cut worker's lock still held, so
    # its pass is requeued through RQ's scheduler, whose lock the cut worker held too: the
    # second worker takes that over once it lapses, and the pass once the agent's lock has.
    assert "Acquired scheduler lock for reconcile" in hosted_cluster.output(first)
    enqueue_reconcile(agent.pk, "manual")
    until(hosted_cluster, [first, second], lambda: statuses(agent) == ["corrected"] * 3,
          "the pass was not finished by another worker")
    # its run is recorded when the pass settles, after the corrections it counts; its trigger
    # is whichever was waiting first (the manual one collapses into a pass already queued)
    until(hosted_cluster, [first, second], lambda: ReconcileRun.objects.filter(
          agent=agent, result="corrected").exists(),
          "the pass that finished the work recorded no corrected run")
    assert SandboxAgent.objects.get(agent=agent).apply_count == 3

    hosted_cluster.network.restore(first)  # the cut worker comes back, mid-pass
    # Its pass finds its session gone. RQ's worker waits out a short cut, and quits when Redis
    # stays away through a job's heartbeat, or when its first command after the cut fails,
    # which can come after it said it was idle again: from here on the test restarts it
    # whenever it has ended, as a supervisor does (`make demo`'s launcher, systemd).
    until(hosted_cluster, [first], supervised(hosted_cluster, first, lambda: idle(first)),
          "the worker that was cut off is not running again", timeout=300)
    assert statuses(agent) == ["corrected"] * 3
    assert SandboxAgent.objects.get(agent=agent).apply_count == 3  # nothing applied twice

    # And it works again, alone.
    hosted_cluster.network.stop_processes(second)
    sandbox_actions.sandbox_deploy(agent, actor="system:test", changes={"model": "gpt-3.5-turbo"},
                           reason="drift again, with only the worker that was cut off")
    enqueue_reconcile(agent.pk, "manual")
    until(hosted_cluster, [first], supervised(
          hosted_cluster, first, lambda: statuses(agent) == ["corrected"] * 4),
          "the worker that was cut off does not correct drift again")
    sandbox = SandboxAgent.objects.get(agent=agent)
    assert sandbox.apply_count == 4 and len(set(sandbox.applied_keys)) == 4  # none twice
    assert list(Correction.objects.filter(agent=agent).values_list("result", flat=True)) == [
        "verified"] * 4
    assert_trail_whole()


class AlertsTab:
    """A signed-in browser tab's live alerts, driven as static/js/alerts.js drives them: after a
    close it reconnects with `since` = the last id it saw, and drops ids it already has. It
    records every id each connection received."""

    def __init__(self, base_url: str, user) -> None:
        browser = Client()
        browser.force_login(user)
        session = browser.cookies[settings.SESSION_COOKIE_NAME].value
        self.cookie = f"{settings.SESSION_COOKIE_NAME}={session}"
        self.base_url = base_url
        self.connections: list[list[int]] = []  # ids received, per connection
        self.shown: list[int] = []  # what the page shows, once each
        self.events: list[str] = []  # what happened to the socket, for failure messages
        self.closed = False  # a connection has ended
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="alerts-tab")
        self._thread.start()

    def _run(self) -> None:
        delay = 0.5
        while not self._stop.is_set():
            since = max(self.shown, default=0)
            url = f"{self.base_url.replace('http', 'ws', 1)}/ws/alerts?since={since}"
            try:
                with ws_client.connect(url, origin=self.base_url, proxy=None, open_timeout=30,
                                       additional_headers={"Cookie": self.cookie}) as socket:
                    received: list[int] = []
                    self.connections.append(received)
                    self.events.append(f"{time.monotonic():.1f} open since={since}")
                    delay = 0.5
                    while not self._stop.is_set():
                        try:
                            message = json.loads(socket.recv(timeout=0.5))
                        except TimeoutError:
                            continue
                        if message.get("id") is None:
                            continue
                        received.append(message["id"])
                        if message["id"] not in self.shown:
                            self.shown.append(message["id"])
            except (OSError, TimeoutError, ConnectionClosed, InvalidHandshake) as error:
                self.events.append(f"{time.monotonic():.1f} closed: {error!r}")
                self.closed = True
                self._stop.wait(delay)
                delay = min(delay * 2, 10)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


def alert_ids(user) -> set[int]:
    """Every alert `user` is meant to see, as the database keeps them."""
    subscription = subscription_for(user, scope="all", agent="", min_severity="")
    return set(AlertEvent.objects.filter(wanted_filter(subscription)).values_list("pk", flat=True))


@pytest.mark.timeout(900)
@pytest.mark.parametrize("held", ["until_the_socket_closes", "for_seconds"])
def test_a_web_host_cut_off_from_redis_delivers_every_alert_it_missed_once(
        people, hosted_cluster, held):
    """Held until the web process gives up on Redis (its channel layer's read times out and
    the socket closes), the tab reconnects and catches up by its last id; held shorter, the
    alerts waiting in Redis reach the open socket once the network is back."""
    agent = approved_agent(people, "refund-agent", enforcement={"default": "correct"})
    worker = hosted_cluster.worker("worker-1", **HOST_SETTINGS)
    web, url = hosted_cluster.web("web-1", **HOST_SETTINGS)
    until(hosted_cluster, [worker], lambda: ReconcileRun.objects.filter(
        agent=agent, result="converged").exists(), "the agent never converged")
    tab = AlertsTab(url, people.dana)
    try:
        until(hosted_cluster, [web], lambda: tab.connections, "the tab never connected", 90)
        sandbox_actions.sandbox_deploy(agent, actor="system:test", changes=BAD_DEPLOYMENT,
                               reason="a deployment quietly widened access")
        until(hosted_cluster, [worker, web], lambda: statuses(agent) == ["corrected"] * 3
              and set(tab.shown) == alert_ids(people.dana), "live alerts did not arrive")
        before = set(tab.shown)

        hosted_cluster.network.cut_between(web, hosted_cluster.store)
        sandbox_actions.sandbox_deploy(agent, actor="system:test",
                                       changes={"model": "gpt-3.5-turbo"},
                                       reason="drift while the web host cannot reach Redis")
        until(hosted_cluster, [worker], lambda: statuses(agent) == ["corrected"] * 4,
              "the worker did not correct the drift")
        missed = alert_ids(people.dana) - before
        assert missed and not missed & set(tab.shown)  # raised, and not delivered yet
        if held == "until_the_socket_closes":
            until(hosted_cluster, [web], lambda: len(tab.connections) == 1 and tab.closed,
                  "the web host kept the socket open without Redis", 180)
        hosted_cluster.network.restore_between(web, hosted_cluster.store)

        until(hosted_cluster, [web], lambda: set(tab.shown) == alert_ids(people.dana),
              f"the alerts raised during the cut were not delivered: {tab.events}", 300)
    finally:
        tab.close()
    assert set(tab.shown) == before | missed
    if held == "until_the_socket_closes":  # caught up by a later connection, by its last id
        assert missed <= {i for received in tab.connections[1:] for i in received}, tab.events
    for received in tab.connections:  # each alert at most once on each connection
        assert len(received) == len(set(received)), tab.events
    assert_trail_whole()
