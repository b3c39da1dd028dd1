"""The permission sources an admin declares (`PERMISSION_SOURCES`), checked when settings load.

Pure Python. One JSON object, each source by name:

    {"crm-db": {"type": "postgres", "secret": "CRM_DB_DSN",
                "resources": {"crm": {"schema": "crm", "tables": ["customers"]}},
                "agents": {"refund-bot": "refund_bot"}}}

`secret` names a connector secret (`CONNECTOR_SECRETS`) holding the source's credentials; a
resource maps a spec `data` resource to what grants it there; `agents` binds an agent to the
database role its grants are made to. Anything else is an error naming where it is.

An OAuth authorisation server (RFC 7662 introspection, RFC 7009 revocation) instead maps scopes
to access, and binds each agent to the connector secret holding the token it acts with:

    {"mail-idp": {"type": "oauth", "secret": "MAIL_IDP_CLIENT",   # client_id:client_secret
                  "introspection_url": "https://idp/introspect",
                  "revocation_url": "https://idp/revoke",
                  "scopes": {"mail.read": {"resource": "mail", "access": "read"}},
                  "agents": {"refund-bot": "REFUND_BOT_MAIL_TOKEN"}}}

An AWS account (`aws_iam`) maps a resource to its ARN and the actions of each access level, and
binds an agent to its IAM role; `endpoint_url` names a stand-in for the AWS API. It may also map
a spec tool to the IAM actions it needs and the ARNs it needs them on (the role is allowed the
tool when its policies allow each action on each ARN):

    "tools": {"s3.put_object": {"actions": ["s3:PutObject"],
                                "resources": ["arn:aws:s3:::invoices/*"]}}
"""

import json
import re
from dataclasses import dataclass, field
from typing import Any

SOURCE_TYPES = ("postgres", "oauth", "aws_iam")
ACCESS_LEVELS = ("read", "write", "admin")
_FIELDS = {"postgres": {"type", "secret", "resources", "agents"},
           "oauth": {"type", "secret", "introspection_url", "revocation_url", "scopes",
                     "agents"},
           "aws_iam": {"type", "secret", "endpoint_url", "resources", "tools", "agents"}}
_IAM_ROLE = re.compile(r"[\w+=,.@-]{1,64}")
_IAM_ACTION = re.compile(r"[a-z0-9-]+:[A-Za-z0-9]+")  # service:Action, no wildcard
_TOOL_NAME = re.compile(r"[a-z0-9][a-z0-9_.-]{0,127}")  # as a spec's tools (registry/manifest.py)
MAX_TOOL_ENTRIES = 64  # actions or ARNs of one tool
_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")
MAX_IDENTIFIER = 63  # PostgreSQL's NAMEDATALEN - 1


class DeclarationError(ValueError):
    """`PERMISSION_SOURCES` holds something the product cannot use."""


@dataclass(frozen=True)
class Resource:
    """Where one spec resource is granted: a schema, and optionally only some of its tables."""

    schema: str = ""
    tables: tuple[str, ...] = ()
    arn: str = ""  # aws_iam: the resource's ARN
    actions: dict[str, tuple[str, ...]] = field(default_factory=dict)  # aws_iam: level -> actions


@dataclass(frozen=True)
class Tool:
    """What one spec tool needs at an AWS account: each action on each ARN (aws_iam)."""

    actions: tuple[str, ...]
    resources: tuple[str, ...]

    def needs(self) -> list[tuple[str, str]]:
        """Every (action, ARN) the tool needs, in declared order."""
        return [(action, arn) for action in self.actions for arn in self.resources]


@dataclass(frozen=True)
class Source:
    """One declared permission source."""

    name: str
    type: str
    secret: str
    resources: dict[str, Resource] = field(default_factory=dict)
    agents: dict[str, str] = field(default_factory=dict)
    introspection_url: str = ""
    revocation_url: str = ""
    scopes: dict[str, tuple[str, str]] = field(default_factory=dict)  # scope -> (resource, access)
    endpoint_url: str = ""  # aws_iam: a stand-in for the AWS API (empty: AWS itself)
    tools: dict[str, Tool] = field(default_factory=dict)  # aws_iam: spec tool -> what it needs

    @property
    def covers(self) -> set[str]:
        """The spec resources this source is the source of record for."""
        if self.type == "oauth":
            return {resource for resource, _ in self.scopes.values()}
        return set(self.resources)

    @property
    def covers_tools(self) -> set[str]:
        """The spec tools this source is the source of record for."""
        return set(self.tools)

    def role_of(self, agent: str) -> str | None:
        """The role `agent`'s grants are made to here (None: not bound)."""
        return self.agents.get(agent)

    def sharing(self, role: str) -> list[str]:
        """Every agent bound to `role` (more than one: a shared role)."""
        return sorted(name for name, bound in self.agents.items() if bound == role)


def _identifier(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value or len(value.encode()) > MAX_IDENTIFIER or (
            "\x00" in value):
        raise DeclarationError(f"{where}: expected a name of 1 to {MAX_IDENTIFIER} bytes")
    return value


def _resource(value: Any, where: str) -> Resource:
    if not isinstance(value, dict) or set(value) - {"schema", "tables"}:
        raise DeclarationError(f"{where}: expected an object with schema and optional tables")
    tables = value.get("tables", [])
    if not isinstance(tables, list):
        raise DeclarationError(f"{where}/tables: expected a list of table names")
    return Resource(_identifier(value.get("schema"), f"{where}/schema"),
                    tuple(_identifier(t, f"{where}/tables/{i}") for i, t in enumerate(tables)))


def _scope(scope: str, value: Any, where: str) -> tuple[str, str]:
    if not scope or any(blank in scope for blank in " \t\r\n"):
        raise DeclarationError(f"{where}: a scope is one word: no spaces, tabs or line breaks "
                               f"(RFC 6749 separates scopes by spaces)")
    if not isinstance(value, dict) or set(value) != {"resource", "access"} or (
            value["access"] not in ACCESS_LEVELS) or not isinstance(value["resource"], str):
        raise DeclarationError(f"{where}: expected {{resource, access}} with access one of "
                               f"{', '.join(ACCESS_LEVELS)}")
    return value["resource"], value["access"]


def _iam_resource(value: Any, where: str) -> Resource:
    if not isinstance(value, dict) or set(value) != {"arn", "actions"} or not isinstance(
            value["arn"], str) or not value["arn"].startswith("arn:"):
        raise DeclarationError(f"{where}: expected an object with an arn and its actions")
    actions = value["actions"]
    if not isinstance(actions, dict) or set(actions) - set(ACCESS_LEVELS) or not all(
            isinstance(a, list) and all(isinstance(x, str) and ":" in x for x in a)
            for a in actions.values()):
        raise DeclarationError(f"{where}/actions: expected read, write and admin lists of "
                               f"service:Action names")
    return Resource(arn=value["arn"], actions={k: tuple(v) for k, v in actions.items()})


def _iam_tool(name: Any, value: Any, where: str) -> Tool:
    if not isinstance(name, str) or not _TOOL_NAME.fullmatch(name):
        raise DeclarationError(f"{where}: expected a tool name of 1 to 128 lowercase letters, "
                               f"digits, '_', '.' or '-', starting alphanumeric (as in a spec)")
    if not isinstance(value, dict) or set(value) != {"actions", "resources"}:
        raise DeclarationError(f"{where}: expected an object with actions and resources")
    actions, resources = value["actions"], value["resources"]
    if not isinstance(actions, list) or not 0 < len(actions) <= MAX_TOOL_ENTRIES or not all(
            isinstance(a, str) and _IAM_ACTION.fullmatch(a) for a in actions):
        raise DeclarationError(f"{where}/actions: expected a list of 1 to {MAX_TOOL_ENTRIES} "
                               f"service:Action names without wildcards (s3:PutObject)")
    if not isinstance(resources, list) or not 0 < len(resources) <= MAX_TOOL_ENTRIES or not all(
            isinstance(r, str) and (r == "*" or r.startswith("arn:")) and "\x00" not in r
            for r in resources):
        raise DeclarationError(f"{where}/resources: expected a list of 1 to {MAX_TOOL_ENTRIES} "
                               f"ARNs (or \"*\" for an action that names no resource)")
    return Tool(tuple(actions), tuple(resources))


def _url(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.startswith(("https://", "http://")):
        raise DeclarationError(f"{where}: expected an http(s) URL")
    return value


def _source(name: str, value: Any, secrets: list[str]) -> Source:
    where = f"PERMISSION_SOURCES/{name}"
    if not _NAME.fullmatch(name):
        raise DeclarationError(f"{where}: a source name is lower-case letters, digits and -")
    kind = value.get("type") if isinstance(value, dict) else None
    if kind not in SOURCE_TYPES:
        raise DeclarationError(f"{where}/type: expected one of {', '.join(SOURCE_TYPES)}")
    if set(value) - _FIELDS[kind]:
        raise DeclarationError(f"{where}: expected {', '.join(sorted(_FIELDS[kind]))}")
    if value.get("secret") not in secrets:
        raise DeclarationError(f"{where}/secret: expected a secret CONNECTOR_SECRETS declares")
    resources, agents = value.get("resources", {}), value.get("agents", {})
    scopes, tools = value.get("scopes", {}), value.get("tools", {})
    if not all(isinstance(x, dict) for x in (resources, agents, scopes)):
        raise DeclarationError(f"{where}: resources, scopes and agents are objects")
    if not isinstance(tools, dict):
        raise DeclarationError(f"{where}/tools: expected an object of spec tools by name")
    if kind == "oauth":
        for agent, token in agents.items():
            if token not in secrets:
                raise DeclarationError(f"{where}/agents/{agent}: expected the connector "
                                       f"secret (CONNECTOR_SECRETS) holding its token")
        return Source(name, kind, value["secret"], agents=dict(agents),
                      introspection_url=_url(value.get("introspection_url"),
                                             f"{where}/introspection_url"),
                      revocation_url=_url(value.get("revocation_url"),
                                          f"{where}/revocation_url"),
                      scopes={str(s): _scope(str(s), v, f"{where}/scopes/{s}")
                              for s, v in scopes.items()})
    if kind == "aws_iam":
        for agent, role in agents.items():
            if not isinstance(role, str) or not _IAM_ROLE.fullmatch(role):
                raise DeclarationError(f"{where}/agents/{agent}: expected an IAM role name")
        endpoint = value.get("endpoint_url")
        return Source(name, kind, value["secret"],
                      {str(r): _iam_resource(v, f"{where}/resources/{r}")
                       for r, v in resources.items()}, dict(agents),
                      endpoint_url=_url(endpoint, f"{where}/endpoint_url") if endpoint else "",
                      tools={t: _iam_tool(t, v, f"{where}/tools/{t}") for t, v in tools.items()})
    return Source(
        name, kind, value["secret"],
        {str(r): _resource(v, f"{where}/resources/{r}") for r, v in resources.items()},
        {str(a): _identifier(role, f"{where}/agents/{a}") for a, role in agents.items()})


def parse_sources(text: str | None, secrets: list[str]) -> dict[str, Source]:
    """The declared sources by name; raises DeclarationError naming the first problem."""
    if not text:
        return {}
    try:
        document = json.loads(text)
    except ValueError as error:
        raise DeclarationError(f"PERMISSION_SOURCES: not JSON ({error})") from None
    if not isinstance(document, dict):
        raise DeclarationError("PERMISSION_SOURCES: expected an object of sources by name")
    sources = {name: _source(name, value, secrets) for name, value in document.items()}
    covered: dict[tuple[str, str], str] = {}
    tools_covered: dict[tuple[str, str], str] = {}
    for source in sources.values():
        for agent in source.agents:
            for resource in sorted(source.covers):
                if (agent, resource) in covered:
                    raise DeclarationError(
                        f"PERMISSION_SOURCES/{source.name}: {resource} of {agent} is already "
                        f"the source of record in {covered[agent, resource]}")
                covered[agent, resource] = source.name
            for tool in sorted(source.covers_tools):
                if (agent, tool) in tools_covered:
                    raise DeclarationError(
                        f"PERMISSION_SOURCES/{source.name}: tool {tool} of {agent} is already "
                        f"the source of record in {tools_covered[agent, tool]}")
                tools_covered[agent, tool] = source.name
    return sources
