"""No table column wraps a word in the middle, on any page with a table, at a laptop's and a
tablet's width: in Chromium, every word of every cell is laid out on one line (a break after
a hyphen is a normal line break, not a mid-word one)."""

import pytest

from reconciliation import actions
from runtime import actions as runtime_actions
from sandbox import actions as sandbox_actions
from tests.conftest import BAD_DEPLOYMENT, approved_agent, refund_manifest
from tests.test_dashboard_browser import Browser, browser_passwords

pytestmark = pytest.mark.browser

# Each word (split at spaces and after hyphens) whose pieces lie on more than one line.
BROKEN_WORDS = """() => {
  const broken = [];
  for (const cell of document.querySelectorAll("table td, table th")) {
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      const words = /[^\\s\\-\\u2013\\u2014]{2,}/g;
      for (let m = words.exec(node.textContent); m; m = words.exec(node.textContent)) {
        const range = document.createRange();
        range.setStart(node, m.index);
        range.setEnd(node, m.index + m[0].length);
        const tops = new Set([...range.getClientRects()].filter((r) => r.width > 0)
          .map((r) => Math.round(r.top)));
        if (tops.size > 1) broken.push(`${m[0]} (table.${cell.closest("table").className})`);
      }
    }
  }
  return broken;
}"""

PAGES = {"dana": ["/", "/agents/", "/agents/payouts-agent/", "/findings/", "/audit/",
                  "/fleet/", "/guardrails/", "/recertification/"],
         "bob": ["/inbox/", "/approvals/", "/escalations/", "/proposals/{proposal}/"],
         "alice": ["/tokens/", "/account/notifications/"]}


def test_no_table_wraps_a_word_in_the_middle(people, live_server_process, monkeypatch):
    from registry import actions as registry_actions
    from registry.choices import VersionSource
    from tests.conftest import sync_playwright

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    browser_passwords()
    agent = approved_agent(people, "payouts-agent", enforcement={"default": "escalate"})
    actions.reconcile_agent(agent.pk, trigger="approved")
    sandbox_actions.sandbox_deploy(agent, actor="system:test", changes=BAD_DEPLOYMENT, reason="bad")
    actions.reconcile_agent(agent.pk, trigger="observation")
    proposal = registry_actions.propose(
        agent, refund_manifest(tools=["orders.lookup", "crm.search"]).spec,
        agent.active_version.metadata, actor=people.alice, source=VersionSource.API).version
    runtime_actions.request_decision(agent, {"action": "payments.refund", "amount": 800},
                             actor=people.alice)
    broken = {}
    with sync_playwright() as playwright:
        browser = Browser(playwright, live_server_process.url)
        for width in (1280, 900):
            for who, paths in PAGES.items():
                page = browser.page(who, width=width)
                for path in paths:
                    page.goto(live_server_process.url + path.format(proposal=proposal.pk))
                    if words := page.evaluate(BROKEN_WORDS):
                        broken[f"{who} {path} at {width}px"] = words[:5]
                page.context.close()
        browser.browser.close()
    assert broken == {}, "\n".join(f"{where}: {words}" for where, words in broken.items())
