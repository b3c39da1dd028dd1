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


AWS = {"aws": {"type": "aws_iam", "secret": "CRM_DB_DSN", "agents": {"refund-bot": "bot-role"},
               "tools": {"s3.put_object": {"actions": ["s3:PutObject"],
                                           "resources": ["arn:aws:s3:::invoices/*"]}}}}


def test_an_aws_source_maps_a_spec_tool_to_the_actions_and_arns_it_needs():
    source = parse_sources(json.dumps(AWS), SECRETS)["aws"]
    assert source.covers_tools == {"s3.put_object"} and source.covers == set()
    assert source.tools["s3.put_object"].needs() == [("s3:PutObject",
                                                      "arn:aws:s3:::invoices/*")]


@pytest.mark.parametrize(("tool", "value", "message"), [
    ("S3.Put", {"actions": ["s3:PutObject"], "resources": ["*"]},
     "aws/tools/S3.Put: expected a tool name of 1 to 128"),
    ("s3.put", ["s3:PutObject"], "aws/tools/s3.put: expected an object with actions and"),
    ("s3.put", {"actions": ["s3:PutObject"]}, "aws/tools/s3.put: expected an object with"),
    ("s3.put", {"actions": ["s3:PutObject"], "resources": ["*"], "mode": "x"},
     "aws/tools/s3.put: expected an object with actions and resources"),
    ("s3.put", {"actions": [], "resources": ["*"]},
     "aws/tools/s3.put/actions: expected a list of 1 to 64 service:Action names"),
    ("s3.put", {"actions": ["s3:Put*"], "resources": ["*"]},
     "aws/tools/s3.put/actions: expected .* without wildcards"),
    ("s3.put", {"actions": ["PutObject"], "resources": ["*"]}, "aws/tools/s3.put/actions"),
    ("s3.put", {"actions": "s3:PutObject", "resources": ["*"]}, "aws/tools/s3.put/actions"),
    ("s3.put", {"actions": ["s3:PutObject"], "resources": ["invoices/*"]},
     "aws/tools/s3.put/resources: expected a list of 1 to 64 ARNs"),
    ("s3.put", {"actions": ["s3:PutObject"], "resources": []}, "aws/tools/s3.put/resources"),
])
def test_each_mistake_in_a_tool_mapping_is_named_where_it_is(tool, value, message):
    with pytest.raises(DeclarationError, match=message):
        parse_sources(json.dumps({"aws": {**AWS["aws"], "tools": {tool: value}}}), SECRETS)


def test_tools_are_an_aws_field_and_one_tool_of_one_agent_has_one_source_of_record():
    with pytest.raises(DeclarationError, match="aws/tools: expected an object of spec tools"):
        parse_sources(json.dumps({"aws": {**AWS["aws"], "tools": ["s3.put_object"]}}), SECRETS)
    with pytest.raises(DeclarationError, match="crm-db: expected agents, resources, secret"):
        parse_sources(json.dumps({"crm-db": {**GOOD["crm-db"], "tools": {}}}), SECRETS)
    with pytest.raises(DeclarationError, match="tool s3.put_object of refund-bot is already "
                                               "the source of record in aws"):
        parse_sources(json.dumps({**AWS, "aws-2": AWS["aws"]}), SECRETS)
