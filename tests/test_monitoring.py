"""The shipped Prometheus alert rules and Grafana dashboard read metrics the product serves, the
rules pass promtool's checks and their own unit tests, and a real Prometheus scraping a real web
process evaluates them without error and fires an alert when its condition holds."""

import json
import re
import shutil
import subprocess
import urllib.parse
import urllib.request

import pytest
import yaml
from django.utils import timezone

from config import embedded_redis
from reconciliation import actions
from reconciliation.models import ControlState
from registry import actions as registry_actions
from registry.choices import VersionSource
from registry.models import Agent
from sandbox import actions as sandbox_actions
from tests.conftest import BAD_DEPLOYMENT, ROOT, eventually, refund_manifest

RULES = ROOT / "deploy" / "prometheus" / "alerts.yml"
RULE_TESTS = ROOT / "deploy" / "prometheus" / "alerts_test.yml"
DASHBOARD = ROOT / "deploy" / "grafana" / "agentgov-dashboard.json"
PROMQL_WORDS = {
    "sum", "max", "min", "avg", "count", "by", "without", "on", "ignoring", "group_left",
    "group_right", "and", "or", "unless", "bool", "offset", "rate", "increase", "delta",
    "histogram_quantile", "vector", "le", "inf", "nan",
}


def promtool() -> str:
    path = shutil.which("promtool")
    assert path, "promtool is missing: `make test` installs Debian's prometheus package"
    return path


def shipped_alerts() -> set[str]:
    return {rule["alert"] for group in yaml.safe_load(RULES.read_text())["groups"]
            for rule in group["rules"]}


def rule_expressions() -> list[str]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule["expr"] for group in groups for rule in group["rules"]]


def dashboard_expressions() -> list[str]:
    panels = json.loads(DASHBOARD.read_text())["panels"]
    return [target["expr"] for panel in panels for target in panel["targets"]]


def metric_names(expression: str) -> set[str]:
    """The series names a PromQL expression reads (label matchers, groupings and strings
    removed first)."""
    bare = re.sub(r'"[^"]*"', "", expression)
    bare = re.sub(r"\{[^}]*\}", " ", bare)
    bare = re.sub(r"\b(by|without|on|ignoring)\s*\([^)]*\)", " ", bare)
    bare = re.sub(r"\[[^\]]*\]", " ", bare)
    names = set(re.findall(r"[A-Za-z_:][A-Za-z0-9_:]*", bare))
    return {name for name in names if name.lower() not in PROMQL_WORDS} - {"up"}


def served_series(text: str) -> set[str]:
    """Every series name a /metrics exposition serves or declares."""
    names = {line.split("{")[0].split()[0] for line in text.splitlines()
             if line and not line.startswith("#")}
    for kind, name in ((m.group(2), m.group(1)) for m in
                       re.finditer(r"^# TYPE (\S+) (\S+)$", text, re.M)):
        names |= {"counter": {name, f"{name.removesuffix('_total')}_total"}, "gauge": {name},
                  "histogram": {f"{name}_bucket", f"{name}_sum", f"{name}_count"}}.get(kind, set())
    return names


def busy_cluster(people) -> Agent:
    """An agent corrected once, so every family of the reconcile metrics has samples."""
    (outcome,) = registry_actions.apply_manifests(
        [refund_manifest(enforcement={"default": "correct"})], actor=people.alice,
        source=VersionSource.YAML)
    registry_actions.approve_proposal(outcome.version.pk, actor=people.bob)
    agent = Agent.objects.get(name="refund-agent")
    actions.reconcile_agent(agent.pk, trigger="manual")
    sandbox_actions.sandbox_deploy(agent, actor="system:test", changes=BAD_DEPLOYMENT,
                                   reason="bad")
    actions.reconcile_agent(agent.pk, trigger="observation")
    return agent


def test_the_rules_pass_promtool_and_their_unit_tests():
    checked = subprocess.run([promtool(), "check", "rules", str(RULES)], capture_output=True,
                             text=True, timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 12 rules found" in checked.stdout
    tested = subprocess.run([promtool(), "test", "rules", str(RULE_TESTS)], capture_output=True,
                            text=True, timeout=60, cwd=RULE_TESTS.parent)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    tested_alerts = set(re.findall(r"alertname: (\w+)", RULE_TESTS.read_text()))
    assert shipped_alerts() - tested_alerts == set(), "every alert has a unit test"


@pytest.mark.django_db
def test_every_metric_the_rules_and_dashboard_read_is_served(people, client):
    busy_cluster(people)
    text = client.get("/metrics").content.decode()
    served = served_series(text)
    wanted = set().union(*map(metric_names, rule_expressions() + dashboard_expressions()))
    assert wanted, "the expressions name no metric"
    assert sorted(wanted - served) == []


def test_the_name_reader_sees_what_an_expression_reads():
    assert metric_names('sum by (le, route) (rate(http_request_duration_seconds_bucket'
                        '{job="agentgov", status=~"5.."}[5m])) > 1') == {
        "http_request_duration_seconds_bucket"}
    assert served_series("# TYPE passes counter\npasses_total 1.0\n# TYPE t histogram\n") == {
        "passes", "passes_total", "t_bucket", "t_sum", "t_count"}


def _query(base: str, path: str, **params: str) -> dict:
    url = f"{base}{path}?{urllib.parse.urlencode(params)}" if params else f"{base}{path}"
    with urllib.request.urlopen(url, timeout=10) as answer:
        return json.loads(answer.read())["data"]


@pytest.fixture
def prometheus(live_server_process, tmp_path):
    """A real Prometheus (Debian's) scraping the live web process every second, with the
    shipped rules evaluated every second."""
    binary = shutil.which("prometheus")
    assert binary, "prometheus is missing: `make test` installs Debian's prometheus package"
    target = live_server_process.url.removeprefix("http://")
    config = tmp_path / "prometheus.yml"
    config.write_text(yaml.safe_dump({
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(RULES)],
        "scrape_configs": [{"job_name": "agentgov", "static_configs": [{"targets": [target]}]}],
    }))
    port = embedded_redis.free_port()
    log = open(tmp_path / "prometheus.log", "w+")  # noqa: SIM115
    process = subprocess.Popen(
        [binary, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}"], stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        eventually(lambda: embedded_redis.port_answers("127.0.0.1", port), timeout=90,
                   message="prometheus did not start")
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


def test_a_real_prometheus_scrapes_evaluates_and_fires(people, prometheus):
    busy_cluster(people)

    def scraped_and_evaluated() -> bool:
        targets = _query(prometheus, "/api/v1/targets")["activeTargets"]
        rules = [rule for group in _query(prometheus, "/api/v1/rules")["groups"]
                 for rule in group["rules"]]
        return (targets and all(t["health"] == "up" for t in targets)
                and len(rules) == len(shipped_alerts())
                and all(not rule["lastEvaluation"].startswith("0001") for rule in rules))

    eventually(scraped_and_evaluated, timeout=120, interval=1,
               message="prometheus never scraped the web process and evaluated every rule")
    rules = [rule for group in _query(prometheus, "/api/v1/rules")["groups"]
             for rule in group["rules"]]
    assert [(rule["name"], rule.get("lastError")) for rule in rules
            if rule["health"] != "ok"] == []
    corrected = _query(prometheus, "/api/v1/query",
                       query='reconcile_passes_total{result="corrected"}')["result"]
    assert [float(sample["value"][1]) for sample in corrected] == [1.0]
    firing = _query(prometheus, "/api/v1/alerts")["alerts"]
    assert [a["labels"]["alertname"] for a in firing if a["state"] == "firing"] == []

    control = ControlState.load()
    control.breaker_tripped_at, control.breaker_reason = timezone.now(), "a wave of drift"
    control.save(update_fields=["breaker_tripped_at", "breaker_reason"])

    def paused_alert() -> bool:
        return any(a["labels"]["alertname"] == "AgentGovCorrectionPaused"
                   and a["state"] == "firing"
                   for a in _query(prometheus, "/api/v1/alerts")["alerts"])

    eventually(paused_alert, timeout=120, interval=1,
               message="the breaker tripped but AgentGovCorrectionPaused never fired")
