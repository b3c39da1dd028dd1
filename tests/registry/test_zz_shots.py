from registry import actions
from registry.choices import VersionSource
from registry.principals import AgentPrincipal
from tests.conftest import PASSWORD, REFUND_AGENT_YAML, refund_manifest
from tests.registry.test_pages import WIDER_DATA, propose

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]

def test_shots(live_server, people, refund_agent):
    from playwright.sync_api import sync_playwright
    propose(refund_agent, people.alice, tools=["orders.lookup"])
    actions.propose(refund_agent, refund_manifest(data=WIDER_DATA).spec, refund_agent.active_version.metadata,
                    actor=AgentPrincipal(refund_agent, None), source=VersionSource.API)
    actions.create_guardrail(actor=people.dana, name="no-admin", effect="warn",
                             expression='spec.data.all(d, d.access != "admin")', message="admin access is rare",
                             selector={"env": "prod"})
    errors = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
        def login(who, width=1280):
            ctx = browser.new_context(viewport={"width": width, "height": 900})
            page = ctx.new_page()
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.goto(live_server.url + "/login/")
            page.fill("#id_username", who); page.fill("#id_password", PASSWORD)
            page.click("button[type=submit]")
            return page
        p = login("alice")
        p.goto(live_server.url + "/agents/"); p.screenshot(path="/tmp/shots/list.png", full_page=True)
        p.goto(live_server.url + "/agents/refund-agent/"); p.screenshot(path="/tmp/shots/detail.png", full_page=True)
        p.goto(live_server.url + "/manifests/new")
        p.fill("#manifest", REFUND_AGENT_YAML.replace("access: read}", "access: rule}", 1).replace("refund-agent", "new-agent"))
        p.click("text=Apply")
        p.click("a[data-line]")
        sel = p.evaluate("() => { const a = document.getElementById('manifest'); return [document.activeElement.id, a.value.slice(a.selectionStart, a.selectionEnd)]; }")
        print("SELECTION", sel)
        p.screenshot(path="/tmp/shots/apply-error.png", full_page=True)
        p.fill("#manifest", REFUND_AGENT_YAML.replace("refund-agent", "new-agent"))
        p.check("input[name=dry_run]")
        p.click("text=Apply")
        p.screenshot(path="/tmp/shots/apply-dry.png", full_page=True)
        b = login("bob")
        b.goto(live_server.url + "/approvals/"); b.screenshot(path="/tmp/shots/inbox.png", full_page=True)
        m = login("bob", 390)
        m.goto(live_server.url + "/approvals/"); m.screenshot(path="/tmp/shots/inbox-phone.png", full_page=True)
        m.goto(live_server.url + "/agents/"); m.screenshot(path="/tmp/shots/list-phone.png", full_page=True)
        d = login("dana")
        d.goto(live_server.url + "/guardrails/new")
        d.fill("#id_name", "bad"); d.fill("#id_expression", "spec.tools.size( >"); d.fill("#id_message", "m")
        d.click("button:has-text('Create')")
        d.screenshot(path="/tmp/shots/guardrail-error.png", full_page=True)
        d.goto(live_server.url + "/guardrails/"); d.screenshot(path="/tmp/shots/guardrails.png", full_page=True)
        browser.close()
    print("ERRORS", errors)
