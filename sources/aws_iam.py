"""The AWS IAM permission source: what an agent's IAM role is allowed to do on the resources a
spec names, read from the role's attached and inline policies, and corrected by detaching (or
deleting) the policy that widens it.

Policy evaluation is a documented subset of AWS's, chosen to err towards "allowed":
- an `Allow` statement counts when one of its `Action`s (or anything outside its `NotAction`)
  and one of its `Resource`s (or anything outside its `NotResource`) match, with `*` and `?`
  the only wildcards (`[`, `]` and every other character are themselves), case-insensitive
  for actions; a policy variable (`${aws:username}`) matches anything, `${*}`, `${?}` and
  `${$}` are the characters themselves; a `Condition` is assumed to hold;
- a `Deny` statement without a `Condition` takes the matching actions away; one with a
  `Condition` is assumed not to hold;
- permission boundaries, session policies, service control policies and resource policies are
  not read (each can only narrow, so the reading may show more than the role can use, never
  less).
The operator names, for each resource, its ARN and the actions that make up each access level,
and for each tool it maps, the actions the tool needs and the ARNs it needs them on: the role is
allowed a tool when every action is allowed on every ARN, partly when some are. A declared ARN is
matched as written (a policy's `Resource` pattern must match it), so a policy on a narrower ARN
than the one declared does not count for it.
"""

import json
import re
from functools import lru_cache
from types import ModuleType
from typing import Any
from urllib.parse import unquote

from config.permission_sources import Source
from reconciliation.connectors.base import CorrectionRefused
from sources.postgres import Reading, highest, rank, taken_elsewhere

LEVELS = ("read", "write", "admin")
TOOL_HELD = (None, "partial", "allowed")  # a tool's reading, least first


def _list(value: Any) -> list[str]:
    if value is None:
        return []
    return [str(v) for v in (value if isinstance(value, list) else [value])]


_PATTERN_PART = re.compile(r"\$\{([^}]*)\}|\*|\?|[^$*?]+|\$")
_ESCAPED_VARIABLE = {"*": "*", "?": "?", "$": "$"}


@lru_cache(maxsize=1024)
def _pattern(text: str) -> re.Pattern[str]:
    """IAM's wildcard matching as a regular expression: `*`, `?` and policy variables only."""
    parts = []
    for match in _PATTERN_PART.finditer(text):
        part, variable = match.group(0), match.group(1)
        if variable is not None:
            literal = _ESCAPED_VARIABLE.get(variable)
            parts.append(re.escape(literal) if literal else ".*")  # unknown value: any
        elif part == "*":
            parts.append(".*")
        elif part == "?":
            parts.append(".")
        else:
            parts.append(re.escape(part))
    return re.compile("".join(parts), re.DOTALL)


def _matches(patterns: list[str], value: str, *, fold: bool) -> bool:
    if fold:
        value, patterns = value.lower(), [p.lower() for p in patterns]
    return any(_pattern(pattern).fullmatch(value) for pattern in patterns)


def _applies(statement: dict[str, Any], action: str, arn: str) -> bool:
    if "NotAction" in statement:
        acts = not _matches(_list(statement["NotAction"]), action, fold=True)
    else:
        acts = _matches(_list(statement.get("Action")), action, fold=True)
    if "NotResource" in statement:
        on = not _matches(_list(statement["NotResource"]), arn, fold=False)
    else:
        on = _matches(_list(statement.get("Resource")), arn, fold=False)
    return acts and on


def allowed(documents: list[tuple[str, dict[str, Any]]], action: str, arn: str) -> list[str]:
    """The policies (by label) whose statements allow `action` on `arn`; [] when none does or
    an unconditional Deny takes it away."""
    allowing, denied = [], False
    for label, document in documents:
        for statement in _list_statements(document):
            if not _applies(statement, action, arn):
                continue
            if statement.get("Effect") == "Deny" and "Condition" not in statement:
                denied = True
            elif statement.get("Effect") == "Allow" and label not in allowing:
                allowing.append(label)
    return [] if denied else allowing


def _list_statements(document: dict[str, Any]) -> list[dict[str, Any]]:
    statements = document.get("Statement", [])
    statements = statements if isinstance(statements, list) else [statements]
    return [s for s in statements if isinstance(s, dict)]


def evaluate(source: Source, documents: list[tuple[str, dict[str, Any]]], role: str
             ) -> Reading:
    """Access per resource, and whether each tool is allowed, from the role's policy documents
    (pure)."""
    access: dict[str, str | None] = {}
    grants: list[dict[str, Any]] = []
    for resource, where in sorted(source.resources.items()):
        levels: list[str | None] = []
        for level in LEVELS:
            for action in where.actions.get(level, ()):
                for label in allowed(documents, action, where.arn):
                    levels.append(level)
                    grants.append({"resource": resource, "level": level, "via": label,
                                   "what": f"{action} on {where.arn}", "kind": "policy"})
        access[resource] = highest(levels)
    tools: dict[str, str | None] = {}
    for name, tool in sorted(source.tools.items()):
        held, needs = 0, tool.needs()
        for action, arn in needs:
            labels = allowed(documents, action, arn)
            held += bool(labels)
            grants += [{"tool": name, "via": label, "what": f"{action} on {arn}",
                        "kind": "policy"} for label in labels]
        tools[name] = "allowed" if held == len(needs) else "partial" if held else None
    return Reading(role, access, grants, tools)


def tool_rank(held: str | None) -> int:
    return TOOL_HELD.index(held) if held in TOOL_HELD else len(TOOL_HELD)


def tools_taken(before: Reading, after: Reading, approved: dict[str, bool] | None,
                but: str | None = None) -> list[str]:
    """The approved tools (other than `but`) that a change from `before` to `after` takes
    away, in part or whole."""
    return [f"tool {name} ({held} to {after.tools.get(name) or 'not allowed'})"
            for name, held in sorted(before.tools.items())
            if name != but and (approved or {}).get(name)
            and tool_rank(after.tools.get(name)) < tool_rank(held)]


def _aws() -> ModuleType:
    """The AWS side (sources/aws_client.py), imported on first use."""
    # boto3 loads with it (~0.3 s and its memory): only in a process that uses an AWS source
    from sources import aws_client

    return aws_client


def _document(value: Any) -> dict[str, Any]:
    if isinstance(value, str):  # the API returns it URL-encoded on the wire
        value = json.loads(unquote(value))
    return value if isinstance(value, dict) else {}


def _documents(iam: Any, role: str) -> list[tuple[str, dict[str, Any]]]:
    documents = []
    for attached in iam.list_attached_role_policies(RoleName=role)["AttachedPolicies"]:
        arn = attached["PolicyArn"]
        version = iam.get_policy(PolicyArn=arn)["Policy"]["DefaultVersionId"]
        body = iam.get_policy_version(PolicyArn=arn, VersionId=version)["PolicyVersion"]
        documents.append((f"attached policy {arn}", _document(body["Document"])))
    for name in iam.list_role_policies(RoleName=role)["PolicyNames"]:
        body = iam.get_role_policy(RoleName=role, PolicyName=name)["PolicyDocument"]
        documents.append((f"inline policy {name}", _document(body)))
    return documents


def read(source: Source, agent: str) -> Reading:
    """What the agent's role is allowed on each of the source's resources."""
    role = source.role_of(agent) or ""
    iam = _aws().client(source)
    return evaluate(source, _aws().call(source, lambda: _documents(iam, role), role), role)


def correct(source: Source, agent: str, resource: str, wanted: str | None,
            approved: dict[str, str | None] | None = None,
            approved_tools: dict[str, bool] | None = None
            ) -> tuple[list[str], Reading, Reading]:
    """Detach (or delete, when inline) every policy that gives the role more than `wanted` on
    `resource`; the role is read again after and must hold no more. Refused before anything is
    detached when that would leave less than `wanted`, or take access `approved` on another
    resource (the policy carries approved access too: a person replaces it)."""
    role = source.role_of(agent) or ""
    sharing = source.sharing(role)
    iam = _aws().client(source)
    documents = _aws().call(source, lambda: _documents(iam, role), role)
    before = evaluate(source, documents, role)
    if rank(before.access.get(resource)) < rank(wanted):
        raise CorrectionRefused(f"{source.name}: a policy granting more is attached by a "
                                f"person, not by a correction")
    labels = sorted({g["via"] for g in before.grants if g.get("resource") == resource
                     and rank(g["level"]) > rank(wanted)})
    left = _detachable(source, role, sharing, documents, labels)
    lost = ([f"{resource} ({wanted} to {left.access.get(resource) or 'no access'})"]
            if rank(left.access.get(resource)) < rank(wanted) else [])
    lost += taken_elsewhere(source, resource, before, left, approved)
    lost += tools_taken(before, left, approved_tools)
    _refuse_if_lost(role, labels, lost)
    done = _detach(source, iam, role, labels)
    after = read(source, agent)
    if rank(after.access.get(resource)) > rank(wanted):
        raise CorrectionRefused(f"role {role} still holds {after.access.get(resource)} on "
                                f"{resource} after detaching its policies")
    return done, before, after


def correct_tool(source: Source, agent: str, tool: str, wanted: bool,
                 approved: dict[str, str | None] | None = None,
                 approved_tools: dict[str, bool] | None = None
                 ) -> tuple[list[str], Reading, Reading]:
    """Take `tool` away from the role (`wanted` False) by detaching (or deleting, when inline)
    every policy that allows any action it needs; the role is read again after and must be
    allowed none of it. Refused before anything is detached when that would take access or
    another tool that is approved (a person replaces the policy), and always when the tool is
    wanted and the role is not allowed it all (a person attaches a policy, never a
    correction)."""
    role = source.role_of(agent) or ""
    sharing = source.sharing(role)
    iam = _aws().client(source)
    documents = _aws().call(source, lambda: _documents(iam, role), role)
    before = evaluate(source, documents, role)
    if wanted:
        if before.tools.get(tool) != "allowed":
            raise CorrectionRefused(f"{source.name}: a policy allowing tool {tool} is attached "
                                    f"by a person, not by a correction")
        return [], before, before
    labels = sorted({g["via"] for g in before.grants if g.get("tool") == tool})
    left = _detachable(source, role, sharing, documents, labels)
    lost = taken_elsewhere(source, "", before, left, approved)
    lost += tools_taken(before, left, approved_tools, but=tool)
    _refuse_if_lost(role, labels, lost)
    done = _detach(source, iam, role, labels)
    after = read(source, agent)
    if after.tools.get(tool) is not None:
        raise CorrectionRefused(f"role {role} is still allowed tool {tool} "
                                f"({after.tools[tool]}) after detaching its policies")
    return done, before, after


def _detachable(source: Source, role: str, sharing: list[str],
                documents: list[tuple[str, dict[str, Any]]], labels: list[str]) -> Reading:
    """What the role would be allowed without the policies `labels`; refused on a shared
    role."""
    if labels and len(sharing) > 1:
        raise CorrectionRefused(f"IAM role {role} is shared by agents {', '.join(sharing)}: "
                                f"detaching from it would change them all")
    return evaluate(source, [d for d in documents if d[0] not in labels], role)


def _refuse_if_lost(role: str, labels: list[str], lost: list[str]) -> None:
    if labels and lost:
        raise CorrectionRefused(
            f"detaching {'; '.join(labels)} from IAM role {role} would also take approved "
            f"access on {', '.join(lost)}: a person replaces the policy with one that allows "
            f"only what is approved")


def _detach(source: Source, iam: Any, role: str, labels: list[str]) -> list[str]:
    """Detach each attached policy and delete each inline one of `labels`: what was run."""
    done = []
    for label in labels:
        kind, _, name = label.partition(" policy ")
        if kind == "attached":
            _aws().call(source, lambda name=name: iam.detach_role_policy(
                RoleName=role, PolicyArn=name))
            done.append(f"detach {name} from role {role}")
        else:
            _aws().call(source, lambda name=name: iam.delete_role_policy(
                RoleName=role, PolicyName=name))
            done.append(f"delete inline policy {name} of role {role}")
    return done
