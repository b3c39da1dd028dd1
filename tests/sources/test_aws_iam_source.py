"""The AWS IAM permission source against moto's server mode (a local stand-in for the AWS API,
never the real service): a policy attached or written by hand that widens the agent's role is
found, detached and verified; an unreachable API and credentials AWS refuses are not acted on
blindly; the policy evaluation subset is pinned by pure cases."""

import json
import re
import socket

import boto3
import pytest
from django.test import Client
from moto.server import ThreadedMotoServer

from audit.models import AuditEntry
from config.permission_sources import parse_sources
from reconciliation.actions import reconcile_agent
from reconciliation.actions.observations import record_observation
from reconciliation.connectors import ConnectorError
from reconciliation.models import Escalation, Finding
from sources.aws_iam import allowed
from sources.models import SourceReading
from tests.conftest import approved_agent

pytestmark = pytest.mark.django_db

KEYS = "CONN35_AWS_KEYS"
ROLE = "refund-agent-role"
TABLE = "arn:aws:dynamodb:us-east-1:123456789012:table/crm"
WIDE = "crm+write=all,@x.y-z"  # every character IAM allows in a name that SQL or a shell would not
CRM_READ = [{"resource": "orders_db", "access": "read"},
            {"resource": "payments", "access": "write"},
            {"resource": "crm", "access": "read"}]


def _policy(*actions: str, resource: str = TABLE, effect: str = "Allow") -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": effect, "Action": list(actions), "Resource": resource}]})


@pytest.fixture
def aws():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    iam = boto3.client("iam", endpoint_url=endpoint, region_name="us-east-1",
                       aws_access_key_id="admin", aws_secret_access_key="admin")
    trust = {"Effect": "Allow", "Action": "sts:AssumeRole",
             "Principal": {"Service": "lambda.amazonaws.com"}}
    iam.create_role(RoleName=ROLE, AssumeRolePolicyDocument=json.dumps({
        "Version": "2012-10-17", "Statement": [trust]}))
    read = iam.create_policy(PolicyName="crm-read", PolicyDocument=_policy(
        "dynamodb:GetItem", "dynamodb:Query"))["Policy"]["Arn"]
    iam.attach_role_policy(RoleName=ROLE, PolicyArn=read)
    yield server, endpoint, iam
    try:
        server.stop()
    except Exception:  # noqa: BLE001 (a test stopped it already)
        pass
    from moto.backends import get_backend

    for backend in get_backend("iam").values():
        for region in list(backend):
            backend[region].reset()


def declare(settings, monkeypatch, endpoint: str, keys: str = "admin:admin",
            tools: dict | None = None) -> None:
    monkeypatch.setenv(KEYS, keys)
    settings.CONNECTOR_SECRETS = [KEYS]
    settings.PERMISSION_SOURCES = parse_sources(json.dumps({"aws": {
        "type": "aws_iam", "secret": KEYS, "endpoint_url": endpoint,
        "resources": {"crm": {"arn": TABLE, "actions": {
            "read": ["dynamodb:GetItem", "dynamodb:Query"],
            "write": ["dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"],
            "admin": ["dynamodb:DeleteTable"]}}},
        **({"tools": tools} if tools else {}),
        "agents": {"refund-agent": ROLE}}}), [KEYS])


def reporting(people, tools: list[str] | None = None):
    agent = approved_agent(people, "refund-agent", connector={"type": "push"}, data=CRM_READ,
                           enforcement={"default": "correct"},
                           **({"tools": tools} if tools is not None else {}))
    state = {k: v for k, v in agent.enforced_spec.items() if k != "enforcement"}
    record_observation(agent, {**state, "running": True}, actor="agent:refund-agent",
                       source="push", trigger_reconcile=False)
    return agent


def test_policies_that_widen_the_role_are_detached_and_verified(
        people, aws, settings, monkeypatch):
    _, endpoint, iam = aws
    declare(settings, monkeypatch, endpoint)
    agent = reporting(people)
    assert reconcile_agent(agent.pk, trigger="manual").result == "converged"

    wide = iam.create_policy(PolicyName=WIDE, PolicyDocument=_policy(
        "dynamodb:*", resource="arn:aws:dynamodb:*:*:table/*"))["Policy"]["Arn"]
    iam.attach_role_policy(RoleName=ROLE, PolicyArn=wide)  # by hand, in the console
    iam.put_role_policy(RoleName=ROLE, PolicyName="quick-fix", PolicyDocument=_policy(
        "dynamodb:PutItem"))
    run = reconcile_agent(agent.pk, trigger="manual")

    finding = Finding.objects.get(agent=agent)
    assert (finding.pointer, finding.expected, finding.actual) == ("/data/crm", "read", "admin")
    assert finding.cause["witnesses"]["said"] == (
        "the agent reported read; aws (the source of record) says admin")
    assert run.result == "corrected" and finding.status == "corrected"
    attached = [p["PolicyName"] for p in
                iam.list_attached_role_policies(RoleName=ROLE)["AttachedPolicies"]]
    assert attached == ["crm-read"]  # what was approved stays
    assert iam.list_role_policies(RoleName=ROLE)["PolicyNames"] == []
    corrected = AuditEntry.objects.get(action="source.corrected")
    assert corrected.after["statements"] == [
        f"detach {wide} from role {ROLE}", f"delete inline policy quick-fix of role {ROLE}"]


def attached(iam) -> list[str]:
    return sorted(p["PolicyName"] for p in
                  iam.list_attached_role_policies(RoleName=ROLE)["AttachedPolicies"])


def page_of(people) -> str:
    """The refund agent's page as alice (its owner) reads it, tags removed."""
    client = Client()
    client.force_login(people.alice)
    return " ".join(re.sub(r"<[^>]+>", " ", client.get("/agents/refund-agent/")
                           .content.decode()).split())


def test_an_api_that_cannot_be_reached_keeps_the_last_state_and_detaches_nothing(
        people, aws, settings, monkeypatch, api_as):
    _, endpoint, iam = aws
    declare(settings, monkeypatch, endpoint)
    agent = reporting(people)
    assert reconcile_agent(agent.pk, trigger="manual").result == "converged"
    wide = iam.create_policy(PolicyName="crm-write", PolicyDocument=_policy(
        "dynamodb:PutItem"))["Policy"]["Arn"]
    iam.attach_role_policy(RoleName=ROLE, PolicyArn=wide)  # by hand, then the API is lost
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        gone = f"http://127.0.0.1:{probe.getsockname()[1]}"  # nothing listens there
    declare(settings, monkeypatch, gone)

    with pytest.raises(ConnectorError, match="permission source aws unreachable"):
        reconcile_agent(agent.pk, trigger="manual")
    reading = SourceReading.objects.get(agent=agent)
    assert (reading.status, reading.access) == ("unknown", {"crm": "read"})  # last known
    assert reading.read_at is not None
    assert attached(iam) == ["crm-read", "crm-write"]  # nothing detached blindly
    assert not Finding.objects.exists() and not Escalation.objects.exists()
    (shown,) = api_as(people.alice).get(
        "/api/v1/agents/refund-agent/permission-sources").json()["sources"]
    assert (shown["source"], shown["type"], shown["status"], shown["access"], shown["error"]) \
        == ("aws", "aws_iam", "unknown", {"crm": "read"}, "permission source aws unreachable")
    page = page_of(people)
    assert f"aws (aws_iam, role {ROLE} ): ⚠ unknown now (permission source aws " \
           f"unreachable); last known state, read" in page
    assert "crm read" in page

    declare(settings, monkeypatch, endpoint)  # back: found and detached
    assert reconcile_agent(agent.pk, trigger="manual").result == "corrected"
    assert attached(iam) == ["crm-read"]


def test_credentials_aws_refuses_to_read_with_are_a_clear_escalation(
        people, aws, settings, monkeypatch, api_as):
    from moto import settings as moto_settings

    _, endpoint, iam = aws
    iam.create_user(UserName="conn35-nobody")  # no policy: it may read nothing
    key = iam.create_access_key(UserName="conn35-nobody")["AccessKey"]
    wide = iam.create_policy(PolicyName="crm-write", PolicyDocument=_policy(
        "dynamodb:PutItem"))["Policy"]["Arn"]
    iam.attach_role_policy(RoleName=ROLE, PolicyArn=wide)
    declare(settings, monkeypatch, endpoint, f"{key['AccessKeyId']}:{key['SecretAccessKey']}")
    agent = reporting(people)
    monkeypatch.setattr(moto_settings, "INITIAL_NO_AUTH_ACTION_COUNT", 0)  # AWS checks now

    for _ in range(2):
        with pytest.raises(ConnectorError, match="the credentials of aws were refused: "
                                                 "AccessDenied"):
            reconcile_agent(agent.pk, trigger="manual")
    monkeypatch.setattr(moto_settings, "INITIAL_NO_AUTH_ACTION_COUNT", float("inf"))
    (escalation,) = Escalation.objects.filter(agent=agent)  # once, not per pass
    assert escalation.finding is None
    assert escalation.reason.startswith("the credentials of aws were refused: AccessDenied")
    assert escalation.reason.endswith("an admin gives the connector credentials that may "
                                      "read it")
    assert not Finding.objects.exists()  # not "nothing found"
    assert attached(iam) == ["crm-read", "crm-write"]
    (shown,) = api_as(people.alice).get(
        "/api/v1/agents/refund-agent/permission-sources").json()["sources"]
    assert (shown["status"], shown["read_at"]) == ("unknown", None)
    assert shown["error"].startswith("the credentials of aws were refused")


def test_a_role_aws_does_not_have_is_escalated_not_read_as_no_access(
        people, aws, settings, monkeypatch):
    _, endpoint, _ = aws
    declare(settings, monkeypatch, endpoint)
    settings.PERMISSION_SOURCES["aws"].agents["refund-agent"] = f"{ROLE}-typo"
    agent = reporting(people)
    with pytest.raises(ConnectorError, match=f"permission source aws has no IAM role {ROLE}-typo"):
        reconcile_agent(agent.pk, trigger="manual")
    (escalation,) = Escalation.objects.filter(agent=agent)
    assert escalation.reason == (f"permission source aws has no IAM role {ROLE}-typo: an admin "
                                 f"binds the agent to the IAM role its grants are made to")
    assert SourceReading.objects.get(agent=agent).status == "unknown"
    assert not Finding.objects.exists()


def test_hostile_names_and_documents_are_read_and_corrected_exactly(
        people, aws, settings, monkeypatch):
    """Names with every character IAM allows (and a path), a document with NotAction, a
    condition holding quotes and unicode, and a wildcard resource: read, then detached and
    deleted by their exact names."""
    _, endpoint, iam = aws
    declare(settings, monkeypatch, endpoint)
    agent = reporting(people)
    hostile = iam.create_policy(
        PolicyName=WIDE, Path="/team+a=b,c@d.e-f/", PolicyDocument=json.dumps({
            "Version": "2012-10-17", "Statement": [{
                "Sid": "Wide", "Effect": "Allow", "NotAction": ["iam:*", "sts:*"],
                "Resource": "arn:aws:dynamodb:us-east-1:123456789012:table/cr?",
                "Condition": {"StringEquals": {"aws:PrincipalTag/team": 'pay"ments ü; --'}}},
            ]}))["Policy"]["Arn"]
    iam.attach_role_policy(RoleName=ROLE, PolicyArn=hostile)
    inline = "in+line=1,2@x.y-z_"  # IAM allows [\w+=,.@-] in a name
    iam.put_role_policy(RoleName=ROLE, PolicyName=inline, PolicyDocument=json.dumps({
        "Version": "2012-10-17", "Statement": [{
            "Effect": "Allow", "Action": "dynamodb:Put${*}", "Resource": TABLE}]}))
    iam.put_role_policy(RoleName=ROLE, PolicyName="brackets", PolicyDocument=_policy(
        "dynamodb:DeleteItem", resource="arn:aws:dynamodb:*:*:table/[a-z]rm"))  # literal [
    reconcile_agent(agent.pk, trigger="manual")

    finding = Finding.objects.get(agent=agent)
    assert (finding.actual, finding.status) == ("admin", "corrected")
    known = AuditEntry.objects.filter(action="source.known").order_by("seq").first()
    assert {(g["level"], g["via"]) for g in known.after["grants"]} == {
        ("read", "attached policy arn:aws:iam::123456789012:policy/crm-read"),
        ("read", f"attached policy {hostile}"), ("write", f"attached policy {hostile}"),
        ("admin", f"attached policy {hostile}")}  # `Put${*}` is no wildcard, `[` no class
    assert AuditEntry.objects.get(action="source.corrected").after["statements"] == [
        f"detach {hostile} from role {ROLE}"]
    assert hostile.endswith(f":policy/team+a=b,c@d.e-f/{WIDE}")
    assert attached(iam) == ["crm-read"]
    assert sorted(iam.list_role_policies(RoleName=ROLE)["PolicyNames"]) == sorted(
        ["brackets", inline])  # they allow nothing on the table: left alone


def test_a_policy_that_also_carries_approved_access_is_escalated_not_detached(
        people, aws, settings, monkeypatch):
    """A person swapped the approved read policy for one that reads and writes: detaching it
    would leave the agent without the read it was approved, so nothing is detached."""
    _, endpoint, iam = aws
    declare(settings, monkeypatch, endpoint)
    agent = reporting(people)
    (read_arn,) = [p["PolicyArn"] for p in
                   iam.list_attached_role_policies(RoleName=ROLE)["AttachedPolicies"]]
    iam.detach_role_policy(RoleName=ROLE, PolicyArn=read_arn)
    both = iam.create_policy(PolicyName="crm-read-write", PolicyDocument=_policy(
        "dynamodb:GetItem", "dynamodb:PutItem"))["Policy"]["Arn"]
    iam.attach_role_policy(RoleName=ROLE, PolicyArn=both)
    reconcile_agent(agent.pk, trigger="manual")

    assert attached(iam) == ["crm-read-write"]
    finding = Finding.objects.get(agent=agent)
    assert finding.status == "escalated"
    assert Escalation.objects.get(finding=finding).reason == (
        f"correction refused: detaching attached policy {both} from IAM role {ROLE} would "
        f"also take approved access on crm (read to no access): a person replaces the policy "
        f"with one that allows only what is approved")
    assert AuditEntry.objects.filter(action="source.correction_refused").exists()
    assert not AuditEntry.objects.filter(action="source.corrected").exists()


def test_credentials_aws_refuses_to_detach_with_are_a_clear_escalation(
        people, aws, settings, monkeypatch):
    from moto import settings as moto_settings

    _, endpoint, iam = aws
    iam.create_user(UserName="conn35-reader")
    iam.put_user_policy(UserName="conn35-reader", PolicyName="read-only", PolicyDocument=(
        _policy("iam:Get*", "iam:List*", resource="*")))
    key = iam.create_access_key(UserName="conn35-reader")["AccessKey"]
    wide = iam.create_policy(PolicyName="crm-write", PolicyDocument=_policy(
        "dynamodb:PutItem"))["Policy"]["Arn"]
    iam.attach_role_policy(RoleName=ROLE, PolicyArn=wide)
    declare(settings, monkeypatch, endpoint, f"{key['AccessKeyId']}:{key['SecretAccessKey']}")
    agent = reporting(people)
    monkeypatch.setattr(moto_settings, "INITIAL_NO_AUTH_ACTION_COUNT", 0)  # AWS checks now

    reconcile_agent(agent.pk, trigger="manual")
    assert "the credentials of aws were refused: AccessDenied" in Escalation.objects.get(
        agent=agent).reason
    monkeypatch.setattr(moto_settings, "INITIAL_NO_AUTH_ACTION_COUNT", float("inf"))
    assert len(iam.list_attached_role_policies(RoleName=ROLE)["AttachedPolicies"]) == 2


@pytest.mark.parametrize(("statements", "expected"), [
    ([{"Effect": "Allow", "Action": "dynamodb:Get*", "Resource": TABLE}], ["p"]),
    ([{"Effect": "Allow", "Action": "DynamoDB:getitem", "Resource": "*"}], ["p"]),
    ([{"Effect": "Allow", "NotAction": "iam:*", "Resource": "*"}], ["p"]),
    ([{"Effect": "Allow", "Action": "*", "NotResource": TABLE}], []),
    ([{"Effect": "Allow", "Action": "*", "Resource": "*"},
      {"Effect": "Deny", "Action": "dynamodb:*", "Resource": TABLE}], []),
    ([{"Effect": "Allow", "Action": "*", "Resource": "*"},  # a conditional deny may not hold
      {"Effect": "Deny", "Action": "dynamodb:*", "Resource": TABLE,
       "Condition": {"Bool": {"aws:SecureTransport": "false"}}}], ["p"]),
    ([{"Effect": "Allow", "Action": "dynamodb:GetItem", "Resource": TABLE,
       "Condition": {"IpAddress": {"aws:SourceIp": "10.0.0.0/8"}}}], ["p"]),
    ([{"Effect": "Allow", "Action": "dynamodb:GetItem", "Resource": f"{TABLE}-other"}], []),
    ([{"Effect": "Allow", "Action": "dynamodb:GetItem", "Resource": TABLE.replace(
        "table/crm", "table/[a-z]rm")}], []),  # IAM has no character classes
    ([{"Effect": "Allow", "Action": "dynamodb:GetItem", "Resource": TABLE.replace(
        "table/crm", "table/${aws:username}")}], ["p"]),  # a policy variable may be anything
    ([{"Effect": "Allow", "Action": "dynamodb:GetItem", "Resource": TABLE.replace(
        "table/crm", "table/cr${?}")}], []),  # `${?}` is a question mark, not a wildcard
    ([{"Effect": "Allow", "NotAction": "dynamodb:GetItem", "Resource": "*"}], []),
    ([{"Effect": "Allow", "Action": "dynamodb:GetItem", "NotResource": f"{TABLE}/index/*"}],
     ["p"]),
])
def test_the_evaluation_subset_errs_towards_allowed(statements, expected):
    assert allowed([("p", {"Statement": statements})], "dynamodb:GetItem", TABLE) == expected


INVOICES = "arn:aws:s3:::invoices/*"
TOOLS = {"s3.get_object": {"actions": ["s3:GetObject"], "resources": [INVOICES]},
         "s3.put_object": {"actions": ["s3:PutObject"], "resources": [INVOICES]}}
APPROVED_TOOLS = ["orders.lookup", "s3.get_object"]  # not s3.put_object


def with_tools(people, aws, settings, monkeypatch):
    """The refund agent approved for s3.get_object (not s3.put_object), its role allowed
    exactly that and crm read: converged."""
    _, endpoint, iam = aws
    declare(settings, monkeypatch, endpoint, tools=TOOLS)
    getter = iam.create_policy(PolicyName="invoices-get", PolicyDocument=_policy(
        "s3:GetObject", resource=INVOICES))["Policy"]["Arn"]
    iam.attach_role_policy(RoleName=ROLE, PolicyArn=getter)
    agent = reporting(people, APPROVED_TOOLS)
    assert reconcile_agent(agent.pk, trigger="manual").result == "converged"
    return agent, endpoint, iam


def test_a_tool_a_hand_attached_policy_allows_is_found_detached_and_verified(
        people, aws, settings, monkeypatch, api_as):
    from audit.sentences import entry_sentence

    agent, _, iam = with_tools(people, aws, settings, monkeypatch)
    wide = iam.create_policy(PolicyName=WIDE, Path="/team+a=b,c@d.e-f/", PolicyDocument=(
        _policy("s3:Put*", resource="arn:aws:s3:::invoices/*")))["Policy"]["Arn"]
    iam.attach_role_policy(RoleName=ROLE, PolicyArn=wide)  # by hand, in the console
    inline = "in+line=1,2@x.y-z_"
    iam.put_role_policy(RoleName=ROLE, PolicyName=inline, PolicyDocument=_policy(
        "s3:*", resource="arn:aws:s3:::*"))
    run = reconcile_agent(agent.pk, trigger="manual")

    finding = Finding.objects.get(agent=agent)
    assert (finding.kind, finding.pointer) == ("tool_added", "/tools/s3.put_object")
    assert finding.cause["witnesses"]["said"] == (
        "the agent did not list tool s3.put_object; aws (the source of record) says its role "
        "is allowed it")
    assert (run.result, finding.status) == ("corrected", "corrected")
    opened = AuditEntry.objects.get(action="finding.opened")
    assert entry_sentence(opened).startswith("refund-agent gained tool s3.put_object")
    assert attached(iam) == ["crm-read", "invoices-get"]  # what was approved stays
    assert iam.list_role_policies(RoleName=ROLE)["PolicyNames"] == []
    corrected = AuditEntry.objects.get(action="source.corrected")
    assert corrected.after["statements"] == [
        f"detach {wide} from role {ROLE}", f"delete inline policy {inline} of role {ROLE}"]
    assert (corrected.after["tool"], corrected.after["before"], corrected.after["after"]) == (
        "s3.put_object", "allowed", None)
    assert {g["via"] for g in corrected.after["revoked"]} == {
        f"attached policy {wide}", f"inline policy {inline}"}
    reading = SourceReading.objects.get(agent=agent)
    assert reading.tools == {"s3.get_object": "allowed", "s3.put_object": None}
    seen = AuditEntry.objects.filter(action="source.known").order_by("seq")
    assert [entry.after["tools"] for entry in seen] == [
        {"s3.get_object": "allowed", "s3.put_object": None},
        {"s3.get_object": "allowed", "s3.put_object": "allowed"},
        {"s3.get_object": "allowed", "s3.put_object": None}]
    (shown,) = api_as(people.alice).get(
        "/api/v1/agents/refund-agent/permission-sources").json()["sources"]
    assert shown["tools"] == {"s3.get_object": "allowed", "s3.put_object": None}
    assert "tools: s3.get_object allowed, s3.put_object not allowed" in page_of(people)
    assert reconcile_agent(agent.pk, trigger="manual").result == "converged"


def test_a_tool_policy_that_also_carries_approved_data_is_escalated_not_detached(
        people, aws, settings, monkeypatch):
    """A person swapped the approved crm read policy for one that also puts invoices:
    detaching it would take the approved read, so nothing is detached."""
    agent, _, iam = with_tools(people, aws, settings, monkeypatch)
    (read_arn,) = [p["PolicyArn"] for p in iam.list_attached_role_policies(
        RoleName=ROLE)["AttachedPolicies"] if p["PolicyName"] == "crm-read"]
    iam.detach_role_policy(RoleName=ROLE, PolicyArn=read_arn)
    both = iam.create_policy(PolicyName="crm-read-invoices-put", PolicyDocument=json.dumps({
        "Version": "2012-10-17", "Statement": [
            {"Effect": "Allow", "Action": ["dynamodb:GetItem", "dynamodb:Query"],
             "Resource": TABLE},
            {"Effect": "Allow", "Action": "s3:PutObject", "Resource": INVOICES}]}))[
        "Policy"]["Arn"]
    iam.attach_role_policy(RoleName=ROLE, PolicyArn=both)
    reconcile_agent(agent.pk, trigger="manual")

    assert attached(iam) == ["crm-read-invoices-put", "invoices-get"]
    finding = Finding.objects.get(agent=agent)
    assert (finding.pointer, finding.status) == ("/tools/s3.put_object", "escalated")
    assert Escalation.objects.get(finding=finding).reason == (
        f"correction refused: detaching attached policy {both} from IAM role {ROLE} would "
        f"also take approved access on crm (read to no access): a person replaces the policy "
        f"with one that allows only what is approved")
    refused = AuditEntry.objects.get(action="source.correction_refused")
    assert (refused.after["tool"], refused.after["wanted"]) == ("s3.put_object", False)
    assert not AuditEntry.objects.filter(action="source.corrected").exists()


def test_a_data_correction_that_would_take_an_approved_tool_is_escalated(
        people, aws, settings, monkeypatch):
    agent, _, iam = with_tools(people, aws, settings, monkeypatch)
    both = iam.create_policy(PolicyName="crm-write-invoices-get", PolicyDocument=json.dumps({
        "Version": "2012-10-17", "Statement": [
            {"Effect": "Allow", "Action": "dynamodb:PutItem", "Resource": TABLE},
            {"Effect": "Allow", "Action": "s3:GetObject", "Resource": INVOICES}]}))[
        "Policy"]["Arn"]
    iam.attach_role_policy(RoleName=ROLE, PolicyArn=both)
    (getter,) = [p["PolicyArn"] for p in iam.list_attached_role_policies(
        RoleName=ROLE)["AttachedPolicies"] if p["PolicyName"] == "invoices-get"]
    iam.detach_role_policy(RoleName=ROLE, PolicyArn=getter)  # the tool now rides on `both`
    reconcile_agent(agent.pk, trigger="manual")

    finding = Finding.objects.get(agent=agent)
    assert (finding.pointer, finding.status) == ("/data/crm", "escalated")
    assert "would also take approved access on tool s3.get_object (allowed to not allowed)" \
        in Escalation.objects.get(finding=finding).reason
    assert attached(iam) == ["crm-read", "crm-write-invoices-get"]


def test_an_approved_tool_iam_denies_is_reported_never_granted(
        people, aws, settings, monkeypatch):
    agent, _, iam = with_tools(people, aws, settings, monkeypatch)
    iam.put_role_policy(RoleName=ROLE, PolicyName="no-gets", PolicyDocument=_policy(
        "s3:Get*", resource="arn:aws:s3:::*", effect="Deny"))
    reconcile_agent(agent.pk, trigger="manual")

    finding = Finding.objects.get(agent=agent)
    assert (finding.kind, finding.pointer) == ("tool_removed", "/tools/s3.get_object")
    assert finding.cause["witnesses"]["said"] == (
        "the agent listed tool s3.get_object; aws (the source of record) says its role is not "
        "allowed it")
    assert finding.status == "escalated"  # the agent will fail; a person grants, not the loop
    assert Escalation.objects.get(finding=finding).reason == (
        "correction refused: aws: a policy allowing tool s3.get_object is attached by a "
        "person, not by a correction")
    assert attached(iam) == ["crm-read", "invoices-get"]
    assert iam.list_role_policies(RoleName=ROLE)["PolicyNames"] == ["no-gets"]
    assert not AuditEntry.objects.filter(action="source.corrected").exists()


def test_a_lost_api_keeps_the_last_known_tools_and_detaches_nothing(
        people, aws, settings, monkeypatch, api_as):
    agent, endpoint, iam = with_tools(people, aws, settings, monkeypatch)
    putter = iam.create_policy(PolicyName="invoices-put", PolicyDocument=_policy(
        "s3:PutObject", resource=INVOICES))["Policy"]["Arn"]
    iam.attach_role_policy(RoleName=ROLE, PolicyArn=putter)  # by hand, then the API is lost
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        gone = f"http://127.0.0.1:{probe.getsockname()[1]}"
    declare(settings, monkeypatch, gone, tools=TOOLS)

    with pytest.raises(ConnectorError, match="permission source aws unreachable"):
        reconcile_agent(agent.pk, trigger="manual")
    reading = SourceReading.objects.get(agent=agent)
    assert (reading.status, reading.tools) == (
        "unknown", {"s3.get_object": "allowed", "s3.put_object": None})  # last known
    assert "invoices-put" in attached(iam) and not Finding.objects.exists()
    (shown,) = api_as(people.alice).get(
        "/api/v1/agents/refund-agent/permission-sources").json()["sources"]
    assert (shown["status"], shown["tools"]["s3.get_object"]) == ("unknown", "allowed")

    declare(settings, monkeypatch, endpoint, tools=TOOLS)  # back: found and detached
    assert reconcile_agent(agent.pk, trigger="manual").result == "corrected"
    assert attached(iam) == ["crm-read", "invoices-get"]


def test_credentials_aws_refuses_to_detach_a_tool_with_are_a_clear_escalation(
        people, aws, settings, monkeypatch):
    from moto import settings as moto_settings

    _, endpoint, iam = aws
    iam.create_user(UserName="conn35-reader")
    iam.put_user_policy(UserName="conn35-reader", PolicyName="read-only", PolicyDocument=(
        _policy("iam:Get*", "iam:List*", resource="*")))
    key = iam.create_access_key(UserName="conn35-reader")["AccessKey"]
    putter = iam.create_policy(PolicyName="invoices-put", PolicyDocument=_policy(
        "s3:PutObject", resource=INVOICES))["Policy"]["Arn"]
    iam.attach_role_policy(RoleName=ROLE, PolicyArn=putter)
    declare(settings, monkeypatch, endpoint, f"{key['AccessKeyId']}:{key['SecretAccessKey']}",
            tools=TOOLS)
    agent = reporting(people, ["orders.lookup"])
    monkeypatch.setattr(moto_settings, "INITIAL_NO_AUTH_ACTION_COUNT", 0)  # AWS checks now

    reconcile_agent(agent.pk, trigger="manual")
    monkeypatch.setattr(moto_settings, "INITIAL_NO_AUTH_ACTION_COUNT", float("inf"))
    finding = Finding.objects.get(agent=agent)
    assert (finding.pointer, finding.status) == ("/tools/s3.put_object", "escalated")
    assert "the credentials of aws were refused: AccessDenied" in Escalation.objects.get(
        finding=finding).reason
    assert attached(iam) == ["crm-read", "invoices-put"]


def _tools_source(**tools):
    return parse_sources(json.dumps({"aws": {
        "type": "aws_iam", "secret": KEYS, "agents": {"refund-agent": ROLE},
        "tools": {name: {"actions": actions, "resources": [INVOICES]}
                  for name, actions in tools.items()}}}), [KEYS])["aws"]


@pytest.mark.parametrize(("statements", "expected"), [
    ([{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}],
     {"get": "allowed", "put": "allowed", "both": "allowed"}),
    ([{"Effect": "Allow", "Action": "s3:Put*", "Resource": INVOICES}],
     {"get": None, "put": "allowed", "both": "partial"}),
    ([{"Effect": "Allow", "Action": "S3:put*", "Resource": "arn:aws:s3:::invoices/*"}],
     {"get": None, "put": "allowed", "both": "partial"}),  # actions without case
    ([{"Effect": "Allow", "NotAction": "s3:Get*", "Resource": "*"}],
     {"get": None, "put": "allowed", "both": "partial"}),
    ([{"Effect": "Allow", "NotAction": ["iam:*"], "Resource": "arn:aws:s3:::*"}],
     {"get": "allowed", "put": "allowed", "both": "allowed"}),
    ([{"Effect": "Allow", "Action": "s3:*", "Resource": "*"},
      {"Effect": "Deny", "NotAction": "s3:GetObject", "Resource": "*"}],
     {"get": "allowed", "put": None, "both": "partial"}),
    ([{"Effect": "Allow", "Action": "s3:Put?bject", "Resource": INVOICES}],
     {"get": None, "put": "allowed", "both": "partial"}),
    ([{"Effect": "Allow", "Action": "s3:PutObject", "Resource": "arn:aws:s3:::invoices/2026/*"}],
     {"get": None, "put": None, "both": None}),  # a narrower ARN than declared does not count
    ([{"Effect": "Allow", "Action": "s3:*", "NotResource": INVOICES}],
     {"get": None, "put": None, "both": None}),
])
def test_tool_actions_are_evaluated_with_the_same_subset(statements, expected):
    from sources.aws_iam import evaluate

    source = _tools_source(get=["s3:GetObject"], put=["s3:PutObject"],
                           both=["s3:GetObject", "s3:PutObject"])
    reading = evaluate(source, [("p", {"Statement": statements})], ROLE)
    assert reading.tools == expected
    assert {g["tool"] for g in reading.grants} == {t for t, held in expected.items() if held}
