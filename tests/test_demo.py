"""`make demo`'s launcher on a fresh machine: SQLite and an embedded Redis, a working site at the
printed URL with the printed logins, live alerts in a real browser, and Ctrl-C stops it all."""

import asyncio
import http.cookiejar
import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from channels_redis.core import RedisChannelLayer

from config import embedded_redis
from tests.conftest import ROOT, eventually

pytestmark = pytest.mark.long(minutes=2)

ARTIFACTS = ROOT / "artifacts"
# Every browser wait is explicit and generous: Playwright's default of 5 s is too short for a
# loaded machine (the API docs page loads and renders its whole schema). A passing run never
# waits it out.
WAIT = 60_000
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


# Reported as a console error, so the page's error list catches every CSP refusal by name.
REPORT_CSP_VIOLATIONS = """document.addEventListener("securitypolicyviolation", (e) =>
  console.error(`CSP violation: ${e.violatedDirective} blocked ${e.blockedURI || "inline"}`));"""


def watch_for_csp_violations(page, problems: list[str]) -> None:
    """Every page the browser opens must carry our CSP and break none of it."""
    page.add_init_script(REPORT_CSP_VIOLATIONS)

    def check(response) -> None:
        if response.request.resource_type == "document" and response.status < 300 and (
                "content-security-policy" not in response.headers):
            problems.append(f"no Content-Security-Policy on {response.url}")

    page.on("response", check)


class Launcher:
    """The launcher process, with its output read line by line in the background."""

    def __init__(self, var_dir: Path, port: int) -> None:
        env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
        env.update(VAR_DIR=str(var_dir), PORT=str(port), PYTHONUNBUFFERED="1")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "config.launcher"], cwd=ROOT, env=env,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        for line in self.process.stdout:
            self.lines.put(line)

    def output(self) -> str:
        """Everything it has printed so far."""
        while not self.lines.empty():
            self.seen.append(self.lines.get())
        return "".join(self.seen)

    def logins(self) -> dict[str, str]:
        """The demo logins, once all of them are printed (admin is the last line)."""
        self.wait_for(r"^\s+admin\s+\S+", timeout=60)
        return dict(re.findall(r"^\s+(alice|bob|carol|dana|admin)\s+(\S+)\s", self.output(),
                               re.M))

    def wait_for(self, pattern: str, timeout: float = 90) -> re.Match:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in self.seen:
                if match := re.search(pattern, line):
                    return match
            try:
                self.seen.append(self.lines.get(timeout=0.5))
            except queue.Empty:
                if self.process.poll() is not None:
                    break
        raise AssertionError(f"never saw {pattern!r}; output:\n{''.join(self.seen)}")


def send_alert(redis_url: str, message: dict) -> None:
    """Publish as a worker would; in a thread, since Playwright's loop owns this one."""
    layer = RedisChannelLayer(hosts=[redis_url])
    event = {"type": "alert.message", "message": message}
    sender = threading.Thread(target=lambda: asyncio.run(layer.group_send("alerts", event)))
    sender.start()
    sender.join(timeout=10)


@pytest.mark.browser
def test_demo_serves_the_printed_url_with_the_printed_logins(tmp_path):
    from playwright.sync_api import expect

    from tests.conftest import sync_playwright

    port = embedded_redis.free_port()
    demo = Launcher(tmp_path / "var", port)
    try:
        demo.wait_for(r"Embedded Redis at (\S+)")
        redis_url = embedded_redis.read_config(tmp_path / "var" / "redis").url
        url = demo.wait_for(r"running at (http://\S+)", timeout=300).group(1)
        assert url == f"http://127.0.0.1:{port}/"
        logins = demo.logins()
        assert set(logins) == {"alice", "bob", "carol", "dana", "admin"}
        # A line per step, then how to follow the logs and stop, then the URL and the logins
        # last: the processes' own output goes to var/logs/, never over them.
        output = demo.output()
        steps = [output.index(text) for text in (
            "==> Migrating", "==> Seeding", "==> Starting", "tail -f", "Press Ctrl-C",
            "running at", "Demo logins")]
        assert steps == sorted(steps), output
        assert output.rstrip().splitlines()[-1].lstrip().startswith("admin"), output
        assert f"tail -f {tmp_path / 'var' / 'logs'}/*.log" in output
        assert json.loads((tmp_path / "var" / "demo.json").read_text()) == {
            "url": url, "pid": demo.process.pid, "logs": str(tmp_path / "var" / "logs")}
        eventually(lambda: "Listening on TCP address" in (
            tmp_path / "var" / "logs" / "web.log").read_text(), timeout=60)
        eventually(lambda: (tmp_path / "var" / "logs" / "worker.log").stat().st_size > 0,
                   timeout=60)

        ARTIFACTS.mkdir(exist_ok=True)
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
            page = browser.new_page()
            page.set_default_timeout(WAIT)  # clicks, fills and page loads
            errors: list[str] = []
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("response",
                    lambda r: errors.append(f"{r.status} {r.url}") if r.status >= 400 else None)
            page.on("request", lambda r: None if r.url.startswith(("http://127.0.0.1", "ws://127"))
                    else errors.append(f"left the machine: {r.url}"))
            watch_for_csp_violations(page, errors)
            page.goto(url)
            expect(page).to_have_url(re.compile(r"/login/"), timeout=WAIT)
            page.fill("#id_username", "dana")
            page.fill("#id_password", logins["dana"])
            page.click("button[type=submit]")
            expect(page.get_by_role("heading", name="Cluster overview")).to_be_visible(timeout=WAIT)
            # A busy machine can take seconds to open the first websocket.
            expect(page.locator("#ws-status")).to_have_attribute("data-state", "open",
                                                                 timeout=WAIT)

            send_alert(redis_url, {"event": "drift.detected", "at": "now",
                                   "agent": "refund-agent", "message": "crm write added"})
            expect(page.locator("#alerts li").first).to_contain_text("drift.detected", timeout=WAIT)
            expect(page.locator("#alerts li").first).to_contain_text("refund-agent", timeout=WAIT)
            page.screenshot(path=str(ARTIFACTS / "overview.png"), full_page=True)

            page.get_by_role("link", name="Audit trail").click()
            expect(page.get_by_role("heading", name="Audit trail")).to_be_visible(timeout=WAIT)
            expect(page.locator("table.audit")).to_contain_text("user.signed_in",
                                                                timeout=WAIT)
            page.screenshot(path=str(ARTIFACTS / "audit-explorer.png"), full_page=True)

            page.get_by_role("link", name="API").click()
            expect(page.locator(".swagger-ui")).to_contain_text("/api/v1/audit/verify",
                                                                timeout=WAIT)
            page.screenshot(path=str(ARTIFACTS / "api-docs.png"))
            assert errors == []
            browser.close()
    finally:
        demo.process.send_signal(signal.SIGINT)
        demo.process.wait(timeout=90)
    demo.wait_for(r"Stopped\.")
    assert demo.process.returncode == 0
    assert not (tmp_path / "var" / "demo.json").exists()
    assert "Listening on TCP address" not in demo.output()  # daphne spoke to its log only
    assert not embedded_redis.port_answers("127.0.0.1", port)
    redis_port = int(redis_url.rsplit(":", 1)[1].split("/")[0])
    assert not embedded_redis.port_answers("127.0.0.1", redis_port)


class SignedIn:
    """A person signed in to the launcher's site with a session cookie, as a browser is."""

    def __init__(self, base: str, username: str, password: str) -> None:
        self.base = base
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
        form = self.get("/login/")[1]
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form).group(1)
        body = urllib.parse.urlencode({"username": username, "password": password,
                                       "csrfmiddlewaretoken": token}).encode()
        with self.opener.open(f"{base}/login/", data=body, timeout=30) as response:
            assert not response.url.endswith("/login/"), "sign-in failed"

    def get(self, path: str) -> tuple[int, str]:
        try:
            with self.opener.open(f"{self.base}{path}", timeout=30) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()


def test_the_launcher_restarts_what_dies_and_serves_pages_while_redis_is_away(tmp_path):
    """kill -9 the worker and the scheduler, stop Redis, kill -9 Redis: each comes back on its
    own, and the web process (never restarted) answers pages throughout."""
    import redis
    from rq import Queue

    from config.launcher import supervisor_rpc

    port, var = embedded_redis.free_port(), tmp_path / "var"
    demo = Launcher(var, port)
    try:
        demo.wait_for(r"running at", timeout=300)
        logins = demo.logins()
        supervisor = supervisor_rpc(var / "supervisord.conf").supervisor
        redis_url = embedded_redis.read_config(var / "redis").url
        redis_port = embedded_redis.read_config(var / "redis").port

        def pid(name: str) -> int:
            return supervisor.getProcessInfo(name)["pid"]

        def enqueued():
            try:  # a new connection each time: the last one may have died with the server
                return Queue("default", connection=redis.Redis.from_url(redis_url)).enqueue(
                    "audit.jobs.checkpoint")
            except redis.ConnectionError:
                return None

        def serves_jobs() -> None:
            # A worker killed while it waited on Redis for work can still swallow the next job
            # (its forked scheduler keeps the socket open; RQ's maintenance returns the job
            # later), so a job is sent every 15 s until one has run.
            jobs: list = []

            def one_ran() -> bool:
                if not jobs or time.monotonic() - jobs[-1][0] > 15:
                    jobs.append((time.monotonic(), eventually(enqueued, timeout=60)))
                return any(job.get_status(refresh=True) == "finished" for _, job in jobs)

            try:
                eventually(one_ran, timeout=180)
            except AssertionError:
                raise AssertionError(f"no worker ran a job ({supervisor.getProcessInfo('worker')}"
                                     f"); launcher said:\n{demo.output()[-6000:]}") from None

        serves_jobs()
        web, worker, cron = pid("web"), pid("worker"), pid("cron")
        os.kill(worker, signal.SIGKILL)
        os.kill(cron, signal.SIGKILL)
        eventually(lambda: pid("worker") not in (0, worker) and pid("cron") not in (0, cron),
                   timeout=120, message="the worker or the scheduler was not restarted")
        serves_jobs()

        dana = SignedIn(f"http://127.0.0.1:{port}", "dana", logins["dana"])
        supervisor.stopProcess("redis")  # Redis away
        for path in ("/", "/agents/", "/audit/"):
            status, _ = dana.get(path)
            assert status == 200, f"{path} answered {status} while Redis was away"
        assert dana.get("/readyz")[0] == 503  # and the probe says so
        supervisor.startProcess("redis")
        server = pid("redis")
        os.kill(server, signal.SIGKILL)  # the embedded Redis dies: restarted in place
        eventually(lambda: pid("redis") not in (0, server)
                   and embedded_redis.port_answers("127.0.0.1", redis_port), timeout=60,
                   message="the embedded Redis was not restarted")
        serves_jobs()
        eventually(lambda: dana.get("/readyz")[0] == 200, timeout=60)
        assert pid("web") == web  # the site never went down
        assert dana.get("/agents/")[0] == 200
    finally:
        demo.process.send_signal(signal.SIGINT)
        demo.process.wait(timeout=90)
    demo.wait_for(r"Stopped\.")
    assert not embedded_redis.port_answers("127.0.0.1", port)
