"""Styled 403, 404 and 500 pages, and a navigation that only offers what a role can open."""

import json
import re

import pytest
from django.contrib.auth.models import User
from django.db import OperationalError
from django.test import Client, RequestFactory

from registry import actions

pytestmark = pytest.mark.django_db

NAV = re.compile(r'<nav aria-label="Main">(.*?)</nav>', re.S)
HREF = re.compile(r'href="([^"]+)"')


def nav_links(client: Client) -> list[str]:
    page = client.get("/").content.decode()
    (nav,) = NAV.findall(page)
    return HREF.findall(nav)


def roleless(username: str = "erin") -> User:
    return actions.create_person(username, actor="system:test", password="x-long-password-1")[0]


@pytest.mark.parametrize("who", ["alice", "bob", "dana", "admin", "nobody"])
def test_every_link_in_the_navigation_opens_for_the_role_that_sees_it(people, client, who):
    user = roleless() if who == "nobody" else getattr(people, who)
    client.force_login(user)
    links = nav_links(client)
    assert "/" in links and len(links) >= 5
    refused = {href: client.get(href).status_code for href in links}
    assert {href: code for href, code in refused.items() if code != 200} == {}


def test_each_role_sees_its_own_links_and_not_others(people, client):
    client.force_login(people.alice)
    owner = nav_links(client)
    client.force_login(people.dana)
    compliance = nav_links(client)
    assert "/audit/" in compliance and "/audit/" not in owner
    assert "/manifests/new" in owner and "/manifests/new" not in compliance


def test_a_missing_page_is_styled_and_offers_a_way_back(people, client):
    client.force_login(people.dana)
    response = client.get("/no-such-page/")
    page = response.content.decode()
    assert response.status_code == 404
    assert "Page not found" in page and 'aria-label="Main"' in page and "/static/" in page
    assert "/no-such-page/" in page


def test_a_missing_api_resource_stays_json(people, api_as):
    response = api_as(people.dana).get("/api/v1/no-such-thing")
    assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"


def test_a_refused_page_is_styled_and_names_the_roles_held(people, client):
    client.force_login(people.alice)
    response = client.get("/audit/")
    page = response.content.decode()
    assert response.status_code == 403
    assert "Not allowed" in page and "owner" in page and 'aria-label="Main"' in page


def test_the_500_page_renders_without_the_database(django_assert_num_queries, rf):
    from config.api_errors import server_error

    with django_assert_num_queries(0):
        response = server_error(rf.get("/agents/"))
    page = response.content.decode()
    assert response.status_code == 500
    assert "Something went wrong" in page and "/static/css/site.css" in page


def _handled(error: BaseException, path: str):
    """The 500 handler's answer while `error` is being handled, as Django calls it."""
    from config.api_errors import server_error

    try:
        raise error
    except BaseException:
        return server_error(RequestFactory().get(path))


def test_an_error_raised_from_a_database_that_did_not_answer_gets_the_503(
        django_assert_num_queries):
    try:
        raise OperationalError("connection refused")
    except OperationalError as cause:
        wrapped = RuntimeError("the session could not be read")
        wrapped.__cause__ = cause
    with django_assert_num_queries(0):
        page, api = _handled(wrapped, "/agents"), _handled(wrapped, "/api/v1/agents")
    assert (page.status_code, page["Retry-After"]) == (503, "5")
    assert "The database did not answer" in page.content.decode()
    assert (api.status_code, json.loads(api.content)["error"]["code"]) == (503, "unavailable")


def test_errors_whose_chain_loops_get_the_500_not_a_hang():
    first, second = RuntimeError("first"), ValueError("second")
    first.__context__, second.__context__ = second, first
    assert _handled(first, "/agents").status_code == 500
    assert _handled(first, "/api/v1/agents").status_code == 500
