"""`make demo`'s launcher on a fresh machine: SQLite and an embedded Redis, a working site at the
printed URL with the printed logins, live alerts in a real browser, and Ctrl-C stops it all."""

import asyncio
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from channels_redis.core import RedisChannelLayer

from config import embedded_redis
from tests.conftest import ROOT

ARTIFACTS = ROOT / "artifacts"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


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
    from playwright.sync_api import expect, sync_playwright

    port = embedded_redis.free_port()
    demo = Launcher(tmp_path / "var", port)
    try:
        redis_url = demo.wait_for(r"Embedded Redis at (\S+)").group(1)
        url = demo.wait_for(r"running at (http://\S+)").group(1)
        assert url == f"http://127.0.0.1:{port}/"
        demo.wait_for(r"Press Ctrl-C")
        output = "".join(demo.seen)
        logins = dict(re.findall(r"^\s+(alice|bob|carol|dana|admin)\s+(\S+)\s", output, re.M))
        assert set(logins) == {"alice", "bob", "carol", "dana", "admin"}

        ARTIFACTS.mkdir(exist_ok=True)
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
            page = browser.new_page()
            errors: list[str] = []
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("response",
                    lambda r: errors.append(f"{r.status} {r.url}") if r.status >= 400 else None)
            page.on("request", lambda r: None if r.url.startswith(("http://127.0.0.1", "ws://127"))
                    else errors.append(f"left the machine: {r.url}"))
            page.goto(url)
            expect(page).to_have_url(re.compile(r"/login/"))
            page.fill("#id_username", "dana")
            page.fill("#id_password", logins["dana"])
            page.click("button[type=submit]")
            expect(page.get_by_role("heading", name="Cluster overview")).to_be_visible()
            expect(page.locator("#ws-status")).to_have_attribute("data-state", "open")

            send_alert(redis_url, {"event": "drift.detected", "at": "now",
                                   "agent": "refund-agent", "message": "crm write added"})
            expect(page.locator("#alerts li").first).to_contain_text("drift.detected")
            expect(page.locator("#alerts li").first).to_contain_text("refund-agent")
            page.screenshot(path=str(ARTIFACTS / "overview.png"), full_page=True)

            page.get_by_role("link", name="Audit trail").click()
            expect(page.get_by_role("heading", name="Audit trail")).to_be_visible()
            expect(page.locator("table.audit")).to_contain_text("user.signed_in")
            page.screenshot(path=str(ARTIFACTS / "audit-explorer.png"), full_page=True)

            page.get_by_role("link", name="API").click()
            expect(page.locator(".swagger-ui")).to_contain_text("/api/v1/audit/verify")
            page.screenshot(path=str(ARTIFACTS / "api-docs.png"))
            assert errors == []
            browser.close()
    finally:
        demo.process.send_signal(signal.SIGINT)
        demo.process.wait(timeout=30)
    demo.wait_for(r"Stopped\.")
    assert demo.process.returncode == 0
    assert not embedded_redis.port_answers("127.0.0.1", port)
    redis_port = int(redis_url.rsplit(":", 1)[1].split("/")[0])
    assert not embedded_redis.port_answers("127.0.0.1", redis_port)
