"""Every console page, walked as each demo user on the seeded demo (seed_demo: forty agents,
history with converged, corrected and escalated ones), reads as text for people: no Python
`None`, no dict or list repr, no negative duration, no fractional count."""

import re
from collections import deque

import pytest
from django.core.management import call_command
from django.test import Client

from registry.management.commands.seed_demo import PERSONAS

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
    # "3.0 findings", "2.0 agents"; "3.0 s" is a duration and stays.
    "a fractional count": re.compile(
        r"(?<![\w.-])\d+\.0(?![\d.])(?!\s?(?:ms|s|%|seconds?|min|minutes?|hours?|h)\b)"),
}
PER_SHAPE = 2  # pages of one shape (/agents/<name>/, /proposals/<id>/) walked per user


def visible_text(html: str) -> str:
    return " ".join(TAG.sub(" ", HIDDEN.sub(" ", html)).split())


def shape(path: str) -> str:
    """/agents/refund-agent/ and /agents/billing-7/ are one shape; so are ?page=2 and ?page=3."""
    bare, _, query = path.partition("?")
    parts = bare.strip("/").split("/")
    keys = sorted(k.split("=")[0] for k in query.split("&") if k)
    return "/".join(parts[:1] + ["*" for _ in parts[1:]]) + "?" + "&".join(keys)


def walk(client: Client) -> dict[str, str]:
    """path -> visible text of every page reachable from the overview (bounded per shape)."""
    seen, shapes, texts = set(), {}, {}
    todo = deque(["/"])
    while todo:
        path = todo.popleft()
        response = client.get(path)
        if response.status_code != 200 or "html" not in response.get("Content-Type", ""):
            continue
        html = response.content.decode()
        texts[path] = visible_text(html)
        for link in HREF.findall(html):
            link = link.replace("&amp;", "&")
            if link in seen or SKIP.search(link):
                continue
            seen.add(link)
            if shapes.setdefault(shape(link), 0) < PER_SHAPE:
                shapes[shape(link)] += 1
                todo.append(link)
    return texts


def leaks_in(text: str) -> list[str]:
    found = []
    for name, pattern in LEAKS.items():
        if match := pattern.search(text):
            found.append(f"{name}: …{text[max(0, match.start() - 60):match.end() + 30]}…")
    return found


def test_no_console_page_shows_python_values_negative_durations_or_fractional_counts(
        settings, tmp_path):
    from django.contrib.auth.models import User

    settings.VAR_DIR = tmp_path
    call_command("seed_demo", "--force")
    problems, walked = {}, {}
    for username, _, _ in PERSONAS:
        client = Client()
        client.force_login(User.objects.get(username=username))
        texts = walk(client)
        walked[username] = len(texts)
        for path, text in texts.items():
            if found := leaks_in(text):
                problems[f"{username} {path}"] = found
    # The walk is real: every demo user reached the overview and the pages linked from it.
    assert all(count >= 5 for count in walked.values()), walked
    assert problems == {}, "\n".join(f"{where}: {found}" for where, found in problems.items())


def test_the_checks_catch_what_they_look_for():
    assert leaks_in("refund-agent: None") and leaks_in("{'a': 1}")
    assert leaks_in("mean time to fix −73.9 s") and leaks_in("3.0 findings")
    assert not leaks_in("corrected and verified in 3.0 s; 3 findings; version 1.0.2")
