"""Every console page, walked as each demo user on the seeded demo (seed_demo: forty agents,
history with converged, corrected and escalated ones), reads as text for people: no Python
`None`, no dict or list repr, no negative duration, no fractional count or `.0` amount, no
time with microseconds; no count shown in two places on a page (each marked
`data-count-of="<what>"`) that disagrees with itself; and no page shows a user a link that
answers them 403."""

import re
from collections import deque

import pytest
from django.core.management import call_command
from django.db import transaction
from django.test import Client, override_settings

from sandbox.management.commands.seed_demo import PERSONAS

pytestmark = pytest.mark.django_db

HREF = re.compile(r'href="(/[^"#]*)"')
HIDDEN = re.compile(r"<(script|style|template|textarea)\b.*?</\1>|<pre\b.*?</pre>", re.S)
TAG = re.compile(r"<[^>]+>")
# Not console pages: the API and its docs, Django's admin, files, signing out, exports.
SKIP = re.compile(r"^/(api|admin|static|ws|accounts/logout|logout|oidc)\b|/export|\.(csv|json)")
LEAKS = {
    "Python None": re.compile(r"\bNone\b"),
    "a dict or list repr": re.compile(r"\{'|\[\{|\['"),
    "a negative duration": re.compile(
        r"[-−]\s?\d+(?:\.\d+)?\s?(?:ms|s|sec|seconds?|min|minutes?|h|hours?|days?)\b"),
    "a time with microseconds": re.compile(r"\d{2}:\d{2}:\d{2}\.\d{3,}"),
    # "3.0 findings", "2.0 agents"; "3.0 s" is a duration and stays.
    "a fractional count": re.compile(
        r"(?<![\w.-])\d+\.0(?![\d.])(?!\s?(?:ms|s|%|seconds?|min|minutes?|hours?|h)\b)"),
}
# An element showing a count names what it counts; its number is its `data-count` or its text.
COUNT_OF = re.compile(r'<[^>]*\bdata-count-of="([^"]+)"[^>]*>([^<]*)')
COUNT_VALUE = re.compile(r'\bdata-count="(\d+)"')
PER_SHAPE = 2  # pages of one shape (/agents/<name>/, /proposals/<id>/) walked per user


def visible_text(html: str) -> str:
    return " ".join(TAG.sub(" ", HIDDEN.sub(" ", html)).split())


def shape(path: str) -> str:
    """/agents/refund-agent/ and /agents/billing-7/ are one shape; so are ?page=2 and ?page=3."""
    bare, _, query = path.partition("?")
    parts = bare.strip("/").split("/")
    keys = sorted(k.split("=")[0] for k in query.split("&") if k)
    return "/".join(parts[:1] + ["*" for _ in parts[1:]]) + "?" + "&".join(keys)


class Walk:
    """What one user reaches from the overview, following links (bounded per shape)."""

    def __init__(self, client: Client) -> None:
        self.texts: dict[str, str] = {}  # path -> visible text of every page that answered
        self.counts: dict[str, list[str]] = {}  # path -> counts that disagree on it
        self.forbidden: dict[str, str] = {}  # link that answered 403 -> the page showing it
        linked_from: dict[str, str] = {}
        shapes: dict[str, int] = {}
        todo = deque(["/"])
        while todo:
            path = todo.popleft()
            response = client.get(path)
            if response.status_code == 403:
                self.forbidden[path] = linked_from.get(path, "(start)")
            if response.status_code != 200 or "html" not in response.get("Content-Type", ""):
                continue
            html = response.content.decode()
            self.texts[path] = visible_text(html)
            if disagreeing := counts_that_disagree(html):
                self.counts[path] = disagreeing
            for link in HREF.findall(html):
                link = link.replace("&amp;", "&")
                if link in linked_from or SKIP.search(link):
                    continue
                linked_from[link] = path
                if shapes.setdefault(shape(link), 0) < PER_SHAPE:
                    shapes[shape(link)] += 1
                    todo.append(link)


def counts_that_disagree(html: str) -> list[str]:
    """What a page counts in more than one place, with the different numbers it shows."""
    seen: dict[str, set[str]] = {}
    for match in COUNT_OF.finditer(html):
        value = COUNT_VALUE.search(match.group(0))
        number = value.group(1) if value else match.group(2).strip()
        seen.setdefault(match.group(1), set()).add(number)
    return [f"{what}: {sorted(numbers)}" for what, numbers in seen.items() if len(numbers) > 1]


def leaks_in(text: str) -> list[str]:
    found = []
    for name, pattern in LEAKS.items():
        if match := pattern.search(text):
            found.append(f"{name}: …{text[max(0, match.start() - 60):match.end() + 30]}…")
    return found


@pytest.fixture(scope="module")
def walked_as(django_db_setup, django_db_blocker, tmp_path_factory) -> dict[str, Walk]:
    """The demo seeded once, walked once as each demo user; built inside a transaction that
    is rolled back at the module's end."""
    from django.contrib.auth.models import User

    quick = override_settings(
        VAR_DIR=tmp_path_factory.mktemp("var"),
        PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"])
    with django_db_blocker.unblock(), quick:
        outer = transaction.atomic()
        outer.__enter__()
        try:
            call_command("seed_demo", "--force")
            walks = {}
            for username, _, _ in PERSONAS:
                client = Client()
                client.force_login(User.objects.get(username=username))
                walks[username] = Walk(client)
            yield walks
        finally:
            transaction.set_rollback(True)
            outer.__exit__(None, None, None)


def test_no_console_page_shows_python_values_negative_durations_or_fractional_counts(
        walked_as):
    problems = {}
    for username, walk in walked_as.items():
        for path, text in walk.texts.items():
            if found := leaks_in(text):
                problems[f"{username} {path}"] = found
    # The walk is real: every demo user reached the overview and the pages linked from it.
    walked = {username: len(walk.texts) for username, walk in walked_as.items()}
    assert all(count >= 5 for count in walked.values()), walked
    assert problems == {}, "\n".join(f"{where}: {found}" for where, found in problems.items())


def test_no_page_counts_one_thing_twice_with_two_answers(walked_as):
    shown = [f"{username} {path}: {found}" for username, walk in walked_as.items()
             for path, found in walk.counts.items()]
    assert shown == [], "\n".join(shown)
    # The check has something to hold: the inbox counts its queue in the nav and its summary.
    inbox = next(text for path, text in walked_as["bob"].texts.items()
                 if path.startswith("/inbox/"))
    assert "Waiting for you:" in inbox


def test_no_page_shows_a_user_a_link_that_answers_them_403(walked_as):
    shown = [f"{username} sees {link} on {page}"
             for username, walk in walked_as.items()
             for link, page in walk.forbidden.items()]
    assert shown == [], "links that answer 403:\n" + "\n".join(shown)


def test_the_checks_catch_what_they_look_for():
    assert leaks_in("refund-agent: None") and leaks_in("{'a': 1}")
    assert leaks_in("mean time to fix −73.9 s") and leaks_in("3.0 findings")
    assert leaks_in("at 2026-12-02 09:14:03.123456+00:00") and leaks_in("refund of 640.0")
    assert leaks_in("limits {'approval_above': 500}")
    assert not leaks_in("corrected and verified in 3.0 s; 3 findings; version 1.0.2")
    assert counts_that_disagree('<span data-count-of="inbox">4</span> … '
                                '<strong data-count-of="inbox">2</strong>') == ["inbox: ['2', '4']"]
    assert counts_that_disagree('<ul data-count-of="open" data-count="3"><li>…</ul> '
                                '<b data-count-of="open">3</b>') == []
