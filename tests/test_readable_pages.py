"""Every page, for each role, on a scene with findings, escalations, decisions and a waiver,
reads as text for people: no Python `None`, no dict or list repr; alerts and audit rows are
sentences; times are human with the exact one on hover."""

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from audit.models import AuditEntry
from audit.sentences import entry_sentence, sentence
from console.templatetags.readable import when
from tests.test_permission_matrix import scene  # noqa: F401 (the shared scene fixture)

pytestmark = pytest.mark.django_db

NAV = re.compile(r'<nav aria-label="Main">(.*?)</nav>', re.S)
HREF = re.compile(r'href="(/[^"#?]*)"')
HIDDEN = re.compile(r"<(script|style|template)\b.*?</\1>", re.S)
TAG = re.compile(r"<[^>]+>")
PYTHON_LEAKS = re.compile(r"\bNone\b|\{'|\[\{")
DETAILS = ["/agents/refund-agent/", "/agents/other-agent/", "/agents/erin-agent/",
           "/proposals/{pending}/", "/proposals/{erins}/", "/group-rules/"]


def visible_text(html: str) -> str:
    return TAG.sub(" ", HIDDEN.sub(" ", html))


def pages_for(client, ids) -> list[str]:
    home = client.get("/").content.decode()
    links = HREF.findall(NAV.findall(home)[0])
    return sorted({*links, *(path.format(**ids) for path in DETAILS)} - {"/api/docs"})


@pytest.mark.parametrize("who", ["alice", "bob", "dana", "admin"])
def test_no_page_shows_python_values(scene, who):  # noqa: F811
    client = scene.page_client(who)
    leaks = {}
    for path in pages_for(client, scene.ids):
        response = client.get(path)
        if response.status_code != 200:
            continue
        text = visible_text(response.content.decode())
        found = sorted({match.group(0) for match in PYTHON_LEAKS.finditer(text)})
        if found:
            where = PYTHON_LEAKS.search(text).start()
            leaks[path] = (found, " ".join(text[max(0, where - 80):where + 40].split()))
    assert leaks == {}, "\n".join(f"{p}: {v}" for p, v in leaks.items())


def test_the_audit_explorer_reads_as_sentences(scene):  # noqa: F811
    client = scene.page_client("dana")
    page = client.get("/audit/").content.decode()
    # the newest page: each activation now also records its review date, so the approval
    # itself may be on an older page; the explorer's own filter finds it
    approvals = client.get("/audit/?action=proposal.approved").content.decode()
    assert "bob approved proposal" in approvals
    findings = client.get("/audit/?action=finding.opened").content.decode()
    assert re.search(r"refund-agent (gained|lost|dropped|raised|runs)[^<]*; finding opened",
                     findings)
    assert re.search(r'<time datetime="[^"]+" title="\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC">', page)


def test_a_finding_row_reads_as_what_the_agent_did(scene):  # noqa: F811
    row = AuditEntry.objects.filter(action="finding.opened", agent="refund-agent",
                                    after__kind="tool_added").first()
    said = entry_sentence(row)
    assert said.startswith(f"refund-agent gained tool {row.after['pointer'].split('/')[-1]}")
    assert "None" not in said and "{" not in said


def test_alerts_are_sentences():
    corrected = {"event": "drift.corrected", "agent": "refund-agent", "kind": "data_widened",
                 "pointer": "/data/crm", "expected": "read", "actual": "write",
                 "seconds_to_verify": 3.21, "severity": "high"}
    assert sentence(corrected) == "refund-agent gained write access to crm; corrected and " \
                                  "verified in 3.2 s"
    detected = {"event": "drift.detected", "agent": "refund-agent", "kind": "tool_added",
                "pointer": "/tools/crm.search", "severity": "high"}
    assert sentence(detected) == "refund-agent gained tool crm.search (high severity)"
    limit = {"event": "drift.detected", "agent": "refund-agent", "severity": "high",
             "kind": "action_limit_missing", "pointer":
                 "/actions/payments.refund/requires_approval_above",
             "expected": 500, "actual": None}
    assert sentence(limit) == ("refund-agent dropped its limit on requires_approval_above of "
                               "payments.refund (approved 500) (high severity)")
    # Proposal alerts (the overview's feed once read "Someone pending proposal").
    pending = {"event": "proposal.pending", "agent": "refund-agent", "proposal": 7,
               "state": "pending", "risk": "high"}
    assert sentence(pending) == "A change to refund-agent waits for approval (high risk)"
    decided = {"event": "proposal.decided", "agent": "refund-agent", "state": "rejected"}
    assert sentence(decided) == "The proposal for refund-agent was rejected"
    review = {"event": "proposal.review", "agent": "refund-agent", "state": "pending"}
    assert sentence(review) == "The proposal for refund-agent has a new review comment"


def test_times_are_human_with_the_exact_one_on_hover():
    moment = timezone.now() - timedelta(minutes=3, seconds=5)
    html = str(when(moment))
    assert ">3\xa0minutes ago</time>" in html
    assert f'title="{moment:%Y-%m-%d %H:%M:%S} UTC"' in html
    assert str(when(None)) == "—" and str(when("not a time")) == "—"
