"""The AWS IAM permission source against moto's server mode (a local stand-in for the AWS API,
never the real service): a policy attached or written by hand that widens the agent's role is
found, detached and verified; an unreachable API and credentials AWS refuses are not acted on
blindly; the policy evaluation subset is pinned by pure cases."""

import json
import socket

import boto3
import pytest
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


def declare(settings, monkeypatch, endpoint: str, keys: str = "admin:admin") -> None:
    monkeypatch.setenv(KEYS, keys)
    settings.CONNECTOR_SECRETS = [KEYS]
    settings.PERMISSION_SOURCES = parse_sources(json.dumps({"aws": {
        "type": "aws_iam", "secret": KEYS, "endpoint_url": endpoint,
        "resources": {"crm": {"arn": TABLE, "actions": {
            "read": ["dynamodb:GetItem", "dynamodb:Query"],
            "write": ["dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"],
            "admin": ["dynamodb:DeleteTable"]}}},
        "agents": {"refund-agent": ROLE}}}), [KEYS])


def reporting(people):
    agent = approved_agent(people, "refund-agent", connector={"type": "push"}, data=CRM_READ,
                           enforcement={"default": "correct"})
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


def test_an_api_that_cannot_be_reached_keeps_the_last_state_and_detaches_nothing(
        people, aws, settings, monkeypatch):
    server, endpoint, iam = aws
    declare(settings, monkeypatch, endpoint)
    agent = reporting(people)
    reconcile_agent(agent.pk, trigger="manual")
    server.stop()
    with pytest.raises(ConnectorError, match="permission source aws unreachable"):
        reconcile_agent(agent.pk, trigger="manual")
    reading = SourceReading.objects.get(agent=agent)
    assert (reading.status, reading.access) == ("unknown", {"crm": "read"})


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
])
def test_the_evaluation_subset_errs_towards_allowed(statements, expected):
    assert allowed([("p", {"Statement": statements})], "dynamodb:GetItem", TABLE) == expected
