"""PERMISSION_SOURCES as the admin writes it: what is accepted, and each mistake named."""

import json

import pytest

from config.permission_sources import DeclarationError, parse_sources

SECRETS = ["CRM_DB_DSN"]
GOOD = {"crm-db": {"type": "postgres", "secret": "CRM_DB_DSN",
                   "resources": {"crm": {"schema": "crm", "tables": ["customers"]}},
                   "agents": {"refund-bot": "refund_bot", "billing-bot": "refund_bot"}}}


def test_a_declared_source_binds_agents_to_roles_and_knows_a_shared_role():
    source = parse_sources(json.dumps(GOOD), SECRETS)["crm-db"]
    assert source.role_of("refund-bot") == "refund_bot" and source.role_of("other") is None
    assert source.resources["crm"].tables == ("customers",)
    assert source.sharing("refund_bot") == ["billing-bot", "refund-bot"]
    assert parse_sources("", SECRETS) == {}


@pytest.mark.parametrize(("change", "message"), [
    ({"type": "mysql"}, "crm-db/type: expected one of postgres"),
    ({"secret": "SECRET_KEY"}, "crm-db/secret: expected a secret CONNECTOR_SECRETS declares"),
    ({"resources": {"crm": {"schema": ""}}}, "crm-db/resources/crm/schema: expected a name"),
    ({"resources": {"crm": {"schema": "crm", "grants": "all"}}}, "expected an object with"),
    ({"agents": {"refund-bot": "x" * 64}}, "crm-db/agents/refund-bot: expected a name of 1"),
    ({"agents": {"refund-bot": "a\x00b"}}, "crm-db/agents/refund-bot: expected a name"),
    ({"dsn": "postgres://"}, "crm-db: expected agents, resources, secret, type"),
])
def test_each_mistake_is_named_where_it_is(change, message):
    with pytest.raises(DeclarationError, match=message.replace("(", r"\(")):
        parse_sources(json.dumps({"crm-db": {**GOOD["crm-db"], **change}}), SECRETS)


def test_one_resource_of_one_agent_has_one_source_of_record():
    twice = {**GOOD, "crm-replica": GOOD["crm-db"]}
    with pytest.raises(DeclarationError, match="already the source of record in crm-db"):
        parse_sources(json.dumps(twice), SECRETS)


def test_what_is_not_json_or_not_an_object_is_refused():
    with pytest.raises(DeclarationError, match="not JSON"):
        parse_sources("{crm-db:", SECRETS)
    with pytest.raises(DeclarationError, match="expected an object"):
        parse_sources("[]", SECRETS)
    with pytest.raises(DeclarationError, match="lower-case letters"):
        parse_sources(json.dumps({"CRM DB": GOOD["crm-db"]}), SECRETS)


@pytest.mark.parametrize("scope", ["mail send", "mail\tsend", "", "mail.send\n"])
def test_an_oauth_scope_that_could_never_be_granted_as_one_is_refused(scope):
    idp = {"mail-idp": {"type": "oauth", "secret": "CRM_DB_DSN",
                        "introspection_url": "https://idp/introspect",
                        "revocation_url": "https://idp/revoke",
                        "scopes": {scope: {"resource": "mail", "access": "read"}},
                        "agents": {"refund-bot": "CRM_DB_DSN"}}}
    with pytest.raises(DeclarationError, match="a scope is one word"):
        parse_sources(json.dumps(idp), SECRETS)
    idp["mail-idp"]["scopes"] = {'mail."sénd";': {"resource": "mail", "access": "read"}}
    assert parse_sources(json.dumps(idp), SECRETS)["mail-idp"].scopes == {
        'mail."sénd";': ("mail", "read")}
