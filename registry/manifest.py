"""The agent manifest (DESIGN.md §4): parse YAML, validate, canonicalise. Pure Python, no Django."""

import dataclasses
import hashlib
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import yaml
from agentgov.mcp_identity import command_identity, url_identity
from yaml.composer import Composer, ComposerError
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.resolver import Resolver

from audit.chain import canonical_json as chain_canonical_json
from config import pointers
from config.durations import (  # noqa: F401 (re-exported: the schema's rules read them here)
    DURATION_EXPECTED,
    MAX_DURATION_SECONDS,
    duration_seconds,
    format_duration,
)
from config.found import described
from config.times import (  # noqa: F401 (re-exported)
    TIMESTAMP_EXPECTED,
    format_timestamp,
    parse_timestamp,
)
from config.unicode_text import is_text

try:  # libyaml parses a 1 MB body in about a third of the time pure Python takes (~4 s at worst)
    from yaml._yaml import CParser as _Parser
except ImportError:  # PyYAML built without libyaml
    from yaml.parser import Parser
    from yaml.reader import Reader
    from yaml.scanner import Scanner

    class _Parser(Reader, Scanner, Parser):  # type: ignore[no-redef]
        """The pure-Python reader, scanner and parser behind one constructor, as in CParser."""

        def __init__(self, stream: str) -> None:
            Reader.__init__(self, stream)
            Scanner.__init__(self)
            Parser.__init__(self)

API_VERSION = "governance/v1"
KIND = "Agent"
ACCESS_LEVELS = ("read", "write", "admin")
CONNECTOR_TYPES = ("push", "http", "sandbox")
ENFORCEMENT_MODES = ("correct", "block", "escalate", "log")
ENFORCEMENT_AREAS = ("config", "actions", "behaviour")
LIMIT_KINDS = ("max_calls", "max_same_record")
MCP_TRANSPORTS = ("stdio", "http")
MAX_MCP_SERVERS = 50
MAX_MCP_TOOLS = 200
BUDGET_KINDS = ("tokens", "cost")  # GenAI usage an agent may spend per window
MAX_BUDGET_SECONDS = 86400

MAX_BYTES = 1_048_576
MAX_DOCUMENTS = 100
MAX_NUMBER = 1e12
# A manifest is at most five levels deep; the cap keeps the recursive composer off the stack limit.
MAX_DEPTH = 32
# A hostile document can produce one error per key; the response body must stay small.
MAX_REPORTED_ERRORS = 100

_SLUG = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")
_NOT_BLANK = re.compile(r"(?s).*\S.*")
_USERNAME = re.compile(r"[\w.@+-]{1,150}")  # the same alphabet as Django's username validator
_LABEL_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,61}[A-Za-z0-9])?")
_LABEL_VALUE = re.compile(f"(?:{_LABEL_NAME.pattern})?")
_DNS_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
_DNS_SUBDOMAIN = re.compile(rf"{_DNS_LABEL}(?:\.{_DNS_LABEL})*")
_TOOL_NAME = re.compile(r"[a-z0-9][a-z0-9_.-]{0,127}")
_RESOURCE = re.compile(r"[^\s\x00-\x1f\x7f]{1,256}")
_ENV_VAR = re.compile(r"[A-Z_][A-Z0-9_]{0,127}")
# MCP names are the server's own (camelCase is common), so case is kept
_MCP_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
_SHA256_HEX = re.compile(r"[0-9a-f]{64}")
# Fingerprint version 2 (agentgov.mcp_fingerprint); a tool may still be pinned by a bare
# version-1 SHA-256, which the proxy honours only for a tool without title, annotations or
# output schema.
_FINGERPRINT = re.compile(r"(?:v2:)?[0-9a-f]{64}")
_FINGERPRINT_V2 = re.compile(r"v2:[0-9a-f]{64}")
_MCP_URI = re.compile(r"[^\s\x00-\x1f\x7f]{1,2048}")
_NON_PRINTABLE = re.compile(
    r"[^\x09\x0a\x0d\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]"
)

SLUG_EXPECTED = (
    "a slug of 1 to 63 lowercase letters, digits and '-',"
    " starting and ending with a letter or digit"
)
_NAME_RULE = "of 1 to 128 lowercase letters, digits, '_', '.' or '-', starting alphanumeric"
TOOL_EXPECTED = f"a tool name {_NAME_RULE}"
ACTION_EXPECTED = f"an action name {_NAME_RULE}"
GRANT_STARTS = ("approval",)  # a grant with a duration counts it from its approval
LABEL_KEY_EXPECTED = (
    "a label key: an optional DNS prefix and '/', then 1 to 63 letters, digits, '.', '_' or '-',"
    " starting and ending with a letter or digit"
)
LABEL_VALUE_EXPECTED = (
    "a label value: empty, or 1 to 63 letters, digits, '.', '_' or '-',"
    " starting and ending with a letter or digit"
)
MCP_NAME_EXPECTED = "a name of 1 to 128 letters, digits, '_', '.' or '-', starting alphanumeric"
FINGERPRINT_EXPECTED = (
    "a fingerprint: 'v2:' and 64 lowercase hex digits, as `agentctl mcp-observe` prints it"
    " (a tool may keep a bare 64-hex version-1 fingerprint)"
)
FINGERPRINT_V2_EXPECTED = (
    "a fingerprint: 'v2:' and 64 lowercase hex digits, as `agentctl mcp-observe` prints it"
)
MCP_URI_EXPECTED = "a URI of 1 to 2048 characters without spaces"
# An MCP server's primitives in its `mcp_servers` entry: the field naming each, what that field
# must look like, and the fingerprints it may be pinned by. Only tools existed before
# fingerprint version 2, so only tools may carry a version-1 fingerprint.
MCP_PRIMITIVES = {
    "tools": ("name", "tool", _MCP_NAME, MCP_NAME_EXPECTED, _FINGERPRINT, FINGERPRINT_EXPECTED),
    "prompts": ("name", "prompt", _MCP_NAME, MCP_NAME_EXPECTED, _FINGERPRINT_V2,
                FINGERPRINT_V2_EXPECTED),
    "resources": ("uri", "resource", _MCP_URI, MCP_URI_EXPECTED, _FINGERPRINT_V2,
                  FINGERPRINT_V2_EXPECTED),
    "resource_templates": ("uri_template", "resource template", _MCP_URI, MCP_URI_EXPECTED,
                           _FINGERPRINT_V2, FINGERPRINT_V2_EXPECTED),
}
# Server-initiated requests a proxy refuses unless the server's entry sets them true.
MCP_SERVER_REQUESTS = ("allow_sampling", "allow_elicitation")
RESOURCE_EXPECTED = "a resource name of 1 to 256 characters without spaces"


def is_label_key(key: object) -> bool:
    """A label key by the Kubernetes rules: an optional DNS prefix and '/', then a name."""
    if not isinstance(key, str):
        return False
    prefix, _, name = key.rpartition("/")
    return bool(_LABEL_NAME.fullmatch(name)) and (
        not prefix or (len(prefix) <= 253 and bool(_DNS_SUBDOMAIN.fullmatch(prefix))))


def is_label_value(value: object) -> bool:
    """A label value: empty, or a name of at most 63 characters."""
    return isinstance(value, str) and bool(_LABEL_VALUE.fullmatch(value))


@dataclass(frozen=True)
class FieldError:
    """One problem in a document: where (JSON pointer, source line) and what was expected."""

    pointer: str
    message: str
    line: int | None = None
    document: int = 0

    def __str__(self) -> str:
        where = self.pointer or "/"
        if self.line is not None:
            where += f" (line {self.line})"
        return f"{where}: {self.message}"


class ManifestError(Exception):
    """A document (or several) failed to parse or validate; `errors` lists every problem found."""

    def __init__(self, errors: list[FieldError]) -> None:
        if len(errors) > MAX_REPORTED_ERRORS:
            hidden = len(errors) - MAX_REPORTED_ERRORS + 1
            errors = [*errors[: MAX_REPORTED_ERRORS - 1], FieldError("", f"{hidden} more errors")]
        self.errors = list(errors)
        super().__init__("; ".join(str(error) for error in self.errors))

    def details(self) -> list[dict[str, Any]]:
        """The errors as JSON-safe dicts for the API's `details` list."""
        return [dataclasses.asdict(error) for error in self.errors]


class ManifestTooLarge(ManifestError):
    """The body is over the size or document-count limit (the API answers 413)."""


@dataclass(frozen=True)
class Manifest:
    """One validated agent document; `spec` is canonical and `spec_sha256` its hash."""

    name: str
    owner: str
    labels: dict[str, str]
    description: str
    spec: dict[str, Any]
    spec_sha256: str


@dataclass
class ParsedDocument:
    """One non-empty YAML document, with the source line of every JSON pointer in it."""

    index: int
    data: Any
    line_of: dict[str, int] = field(default_factory=dict)


def join_pointer(base: str, token: Any) -> str:
    """Append one reference token to a JSON pointer, escaped as RFC 6901 says."""
    return pointers.join(base, token)


_got = described


# --- canonical JSON (durations: config/durations.py, timestamps: config/times.py) ---


# The one JSON spelling the audit trail hashes with, so a spec hash means the same everywhere.
canonical_json = chain_canonical_json


# --- validation -------------------------------------------------------------------------------


class _Checker:
    """Collects every error of a document instead of stopping at the first."""

    def __init__(self) -> None:
        self.errors: list[FieldError] = []

    def error(self, pointer: str, message: str) -> None:
        """Record one problem."""
        self.errors.append(FieldError(pointer, message))

    def mapping(
        self, value: Any, pointer: str, required: tuple = (), optional: tuple = ()
    ) -> dict | None:
        """The value if it is a mapping with no unknown keys; reports missing required keys."""
        if not isinstance(value, dict):
            self.error(pointer, f"expected a mapping; got {_got(value)}")
            return None
        allowed = (*required, *optional)
        for key in value:
            if key not in allowed:
                self.error(
                    join_pointer(pointer, key),
                    f"unknown field {str(key)!r}; expected one of {', '.join(allowed)}",
                )
        for key in required:
            if key not in value:
                self.error(join_pointer(pointer, key), f"missing required field {key!r}")
        return value

    def sequence(self, value: Any, pointer: str, noun: str, max_items: int) -> list:
        """The value if it is a list of at most max_items, else [] after reporting why."""
        if not isinstance(value, list):
            self.error(pointer, f"expected a list of {noun}; got {_got(value)}")
            return []
        if len(value) > max_items:
            self.error(pointer, f"expected at most {max_items} {noun}; got {len(value)}")
            return []
        return value

    def string(
        self, value: Any, pointer: str, expected: str = "a string", *,
        pattern: re.Pattern | None = None, min_len: int = 0, max_len: int | None = None,
    ) -> str | None:
        """The value if it is a string of the right length and shape, else None."""
        if isinstance(value, str) and not is_text(value):
            self.error(pointer, _NOT_TEXT)
            return None
        if (
            isinstance(value, str)
            and len(value) >= min_len
            and (max_len is None or len(value) <= max_len)
            and (pattern is None or pattern.fullmatch(value))
        ):
            return value
        self.error(pointer, f"expected {expected}; got {_got(value)}")
        return None

    def choice(self, value: Any, pointer: str, options: tuple[str, ...]) -> str | None:
        """The value if it is one of the options, else None."""
        if isinstance(value, str) and value in options:
            return value
        self.error(pointer, f"expected one of {', '.join(options)}; got {_got(value)}")
        return None

    def parsed(self, value: Any, pointer: str, parse: Callable[[Any], Any]) -> Any:
        """The value parsed, or None after recording the ValueError's message."""
        try:
            return parse(value)
        except ValueError as exc:
            self.error(pointer, str(exc))
            return None

    def number(
        self, value: Any, pointer: str, minimum: int, *, exclusive: bool = False,
        integer: bool = False,
    ) -> int | float | None:
        """A finite number within bounds; integral floats become ints so 500.0 hashes as 500."""
        kind = "an integer" if integer else "a number"
        expected = f"{kind} {'>' if exclusive else '>='} {minimum}"
        # bool is an int subclass in Python, but `max: true` is surely a mistake
        if isinstance(value, bool) or not isinstance(value, int | float):
            problem = f"expected {expected}; got {_got(value)}"
        elif abs(value) > MAX_NUMBER or not math.isfinite(value):  # 10**400: no float
            problem = f"expected {expected} and at most 1e12; got {_got(value)}"
        else:
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            if (integer and not isinstance(value, int)) or value < minimum or (
                exclusive and value == minimum
            ):
                problem = f"expected {expected}; got {_got(value)}"
            else:
                return value
        self.error(pointer, problem)
        return None


def _optional(mapping: dict, key: str, default: Any) -> Any:
    """An optional field's value; null counts as absent, as Kubernetes treats it."""
    value = mapping.get(key)
    return default if value is None else value


def _present(check: Callable[..., Any], entry: dict, key: str, p: str, *args: Any,
             **kwargs: Any) -> Any:
    """Run a check on entry[key] at p/key if the key is there; a missing key is reported already."""
    return check(entry[key], f"{p}/{key}", *args, **kwargs) if key in entry else None


def _metadata(c: _Checker, raw: Any) -> dict[str, Any]:
    """Validated metadata: name, owner, labels, description."""
    p = "/metadata"
    meta = c.mapping(raw, p, required=("name", "owner"), optional=("labels", "description"))
    if meta is None:
        return {}
    labels: dict[str, str] = {}
    raw_labels = _optional(meta, "labels", {})
    if not isinstance(raw_labels, dict):
        c.error(f"{p}/labels", f"expected a mapping of labels; got {_got(raw_labels)}")
        raw_labels = {}
    for key, value in raw_labels.items():
        q = join_pointer(f"{p}/labels", key)
        if not is_label_key(key):
            c.error(q, f"expected {LABEL_KEY_EXPECTED}; got {_got(key)}")
            continue
        value = c.string(value, q, LABEL_VALUE_EXPECTED, pattern=_LABEL_VALUE)
        if value is not None:
            labels[key] = value
    return {
        "name": _present(c.string, meta, "name", p, SLUG_EXPECTED, pattern=_SLUG),
        "owner": _present(c.string, meta, "owner", p, "a username of 1 to 150 letters, digits"
                          " and @.+-_", pattern=_USERNAME),
        "labels": dict(sorted(labels.items())),
        "description": c.string(_optional(meta, "description", ""), f"{p}/description",
                                "a string of at most 2000 characters", max_len=2000),
    }


def _connector(c: _Checker, raw: Any, p: str) -> dict[str, str] | None:
    """Validated connector: push and sandbox take nothing else, http needs url and secret_env."""
    conn = c.mapping(raw, p, required=("type",), optional=("url", "secret_env"))
    if conn is None or "type" not in conn:
        return None
    kind = c.choice(conn["type"], f"{p}/type", CONNECTOR_TYPES)
    if kind is None:
        return None
    if kind != "http":
        for key in ("url", "secret_env"):
            if key in conn:
                c.error(f"{p}/{key}", f"expected no {key}: only connector type http takes one;"
                        f" got {_got(conn[key])}")
        return {"type": kind}
    for key in ("url", "secret_env"):
        if key not in conn:
            c.error(f"{p}/{key}", f"missing required field {key!r} for connector type http")
    url = _present(c.string, conn, "url", p, "an http or https URL", max_len=2048)
    if url is not None:
        _http_url(c, url, f"{p}/url")
    secret = _present(c.string, conn, "secret_env", p,
                      "a connector secret name like REFUND_PLATFORM_SECRET ([A-Z_][A-Z0-9_]*)"
                      " that an admin granted to the owner",
                      pattern=_ENV_VAR)
    return {"type": "http", "url": url, "secret_env": secret}


def _tools(c: _Checker, raw: Any, p: str) -> list[str]:
    """Unique tool names, sorted."""
    first: dict[str, int] = {}
    for i, item in enumerate(c.sequence(raw, p, "tools", 200)):
        name = c.string(item, f"{p}/{i}", TOOL_EXPECTED, pattern=_TOOL_NAME)
        if name is not None and name in first:
            c.error(f"{p}/{i}", f"expected each tool once; got {name!r} again"
                    f" (first at {p}/{first[name]})")
        elif name is not None:
            first[name] = i
    return sorted(first)


def _data(c: _Checker, raw: Any, p: str) -> list[dict[str, str]]:
    """Data scopes, one per resource, sorted by resource."""
    first: dict[str, int] = {}
    scopes = []
    for i, item in enumerate(c.sequence(raw, p, "data scopes", 200)):
        entry = c.mapping(item, f"{p}/{i}", required=("resource", "access"))
        if entry is None:
            continue
        resource = _present(c.string, entry, "resource", f"{p}/{i}", RESOURCE_EXPECTED,
                            pattern=_RESOURCE)
        access = _present(c.choice, entry, "access", f"{p}/{i}", ACCESS_LEVELS)
        if resource is not None and resource in first:
            c.error(f"{p}/{i}/resource", f"expected each resource once; got {resource!r} again"
                    f" (first at {p}/{first[resource]})")
        elif resource is not None and access is not None:
            first[resource] = i
            scopes.append({"resource": resource, "access": access})
    return sorted(scopes, key=lambda scope: scope["resource"])


def _actions(c: _Checker, raw: Any, p: str) -> dict[str, dict[str, int | float | None]]:
    """Action rules by name, both thresholds present (None where unset)."""
    if not isinstance(raw, dict):
        c.error(p, f"expected a mapping of action names to rules; got {_got(raw)}")
        return {}
    if len(raw) > 200:
        c.error(p, f"expected at most 200 actions; got {len(raw)}")
        return {}
    rules = {}
    for name, raw_rule in raw.items():
        q = join_pointer(p, name)
        name_ok = c.string(name, q, ACTION_EXPECTED, pattern=_TOOL_NAME) is not None
        rule = c.mapping(raw_rule, q, optional=("approval_above", "max"))
        if rule is None or not name_ok:
            continue
        above, most = _optional(rule, "approval_above", None), _optional(rule, "max", None)
        if above is None and most is None:
            c.error(q, "expected at least one of approval_above, max; got neither")
            continue
        if above is not None:
            above = c.number(above, f"{q}/approval_above", 0)
        if most is not None:
            most = c.number(most, f"{q}/max", 0, exclusive=True)
        if above is not None and most is not None and above > most:
            c.error(f"{q}/approval_above", f"expected at most max ({most}); got {above}")
        rules[name] = {"approval_above": above, "max": most}
    return dict(sorted(rules.items()))


def _limits(c: _Checker, raw: Any, p: str) -> list[dict[str, Any]]:
    """Behaviour limits, one per (resource, kind), sorted, durations in their largest unit."""
    first: dict[tuple[str, str], int] = {}
    limits = []
    for i, item in enumerate(c.sequence(raw, p, "limits", 200)):
        q = f"{p}/{i}"
        entry = c.mapping(item, q, required=("resource", "per"), optional=LIMIT_KINDS)
        if entry is None:
            continue
        kinds = [kind for kind in LIMIT_KINDS if entry.get(kind) is not None]
        if len(kinds) != 1:
            c.error(q, "expected exactly one of max_calls, max_same_record;"
                    f" got {'both' if kinds else 'neither'}")
        counts = [c.number(entry[kind], f"{q}/{kind}", 1, integer=True) for kind in kinds]
        resource = _present(c.string, entry, "resource", q, RESOURCE_EXPECTED, pattern=_RESOURCE)
        seconds = _present(c.parsed, entry, "per", q, duration_seconds)
        if len(kinds) != 1 or None in (resource, seconds, counts[0]):
            continue
        key = (resource, kinds[0])
        if key in first:
            c.error(q, f"expected one {kinds[0]} limit per resource; got a second one for"
                    f" {resource!r} (first at {p}/{first[key]})")
            continue
        first[key] = i
        limits.append({"resource": resource, kinds[0]: counts[0], "per": format_duration(seconds)})
    return sorted(limits, key=lambda limit: (limit["resource"], "max_calls" not in limit))


def _budgets(c: _Checker, raw: Any, p: str) -> list[dict[str, Any]]:
    """Token and cost budgets, one per (kind, window), sorted: warn at 80%, enforce above."""
    first: dict[tuple[str, int], int] = {}
    budgets = []
    for i, item in enumerate(c.sequence(raw, p, "budgets", 20)):
        q = f"{p}/{i}"
        entry = c.mapping(item, q, required=("per",), optional=BUDGET_KINDS)
        if entry is None:
            continue
        kinds = [kind for kind in BUDGET_KINDS if entry.get(kind) is not None]
        if len(kinds) != 1:
            c.error(q, "expected exactly one of tokens, cost;"
                    f" got {'both' if kinds else 'neither'}")
            continue
        amount = c.number(entry[kinds[0]], f"{q}/{kinds[0]}", 0, exclusive=True,
                          integer=kinds[0] == "tokens")
        seconds = _present(c.parsed, entry, "per", q, duration_seconds)
        if seconds is not None and not 60 <= seconds <= MAX_BUDGET_SECONDS:
            c.error(f"{q}/per", f"expected a window between 1m and 1d; got {entry['per']!r}")
            continue
        if None in (amount, seconds):
            continue
        key = (kinds[0], seconds)
        if key in first:
            c.error(q, f"expected one {kinds[0]} budget per window; got a second one per"
                    f" {format_duration(seconds)} (first at {p}/{first[key]})")
            continue
        first[key] = i
        budgets.append((kinds[0], seconds, amount))
    return [{kind: amount, "per": format_duration(seconds)}
            for kind, seconds, amount in sorted(budgets)]


def _grant_clock(c: _Checker, entry: dict, q: str) -> tuple[int, Any] | None:
    """(0, instant) for a fixed expiry; (1, seconds) for a duration counted from approval."""
    if ("expires_at" in entry) == ("duration" in entry):
        c.error(q, "expected exactly one of expires_at (a fixed end) or duration (counted from"
                f" approval); got {'both' if 'expires_at' in entry else 'neither'}")
        return None
    if "expires_at" in entry:
        if "starts" in entry:
            c.error(f"{q}/starts", "expected starts only with duration; expires_at is fixed")
            return None
        stamp = c.parsed(entry["expires_at"], f"{q}/expires_at", parse_timestamp)
        return None if stamp is None else (0, stamp)
    starts = c.choice(_optional(entry, "starts", GRANT_STARTS[0]), f"{q}/starts", GRANT_STARTS)
    seconds = c.parsed(entry["duration"], f"{q}/duration", duration_seconds)
    return None if None in (starts, seconds) else (1, seconds)


def _grants(c: _Checker, raw: Any, p: str) -> list[dict[str, str]]:
    """Time-bounded grants with a UTC expiry or a duration counted from approval, sorted by
    (resource, fixed before counted, expiry or duration, access, reason)."""
    grants = []
    for i, item in enumerate(c.sequence(raw, p, "grants", 100)):
        q = f"{p}/{i}"
        entry = c.mapping(item, q, required=("resource", "access", "reason"),
                          optional=("expires_at", "duration", "starts"))
        if entry is None:
            continue
        grant = (
            _present(c.string, entry, "resource", q, RESOURCE_EXPECTED, pattern=_RESOURCE),
            _grant_clock(c, entry, q),
            _present(c.choice, entry, "access", q, ACCESS_LEVELS),
            _present(c.string, entry, "reason", q, "a non-empty reason of at most 1000"
                     " characters", pattern=_NOT_BLANK, max_len=1000),
        )
        if None not in grant:
            grants.append(grant)
    # sort on the instant itself: ".5Z" sorts before "Z" as text, which is the wrong way round
    return [
        {"resource": r, "access": a, "expires_at": format_timestamp(end), "reason": why}
        if counted == 0 else
        {"resource": r, "access": a, "duration": format_duration(end),
         "starts": GRANT_STARTS[0], "reason": why}
        for r, (counted, end), a, why in sorted(grants)
    ]


def _http_url(c: _Checker, url: str, pointer: str) -> None:
    """Report a URL that is not http(s) with a host, or that carries credentials."""
    try:
        parts = urlsplit(url)
        # .port raises ValueError on a port that is not a number in range
        good = parts.scheme in ("http", "https") and bool(parts.hostname) and (
            parts.port is None or parts.port > 0
        )
    except ValueError:  # e.g. an unclosed IPv6 bracket
        good = False
    if not good or any(ch.isspace() for ch in url):
        c.error(pointer, f"expected an http or https URL with a host; got {_got(url)}")
    elif parts.username or parts.password:
        c.error(pointer, "expected a URL without credentials (name them in secret_env)")


def _identified(c: _Checker, identity: Callable[[str], str], target: str,
                pointer: str) -> str | None:
    """`target` if the one MCP identity (agentgov.mcp_identity) can read it: a server no judge
    could tell apart from another spelling is not approved (an unclosed quote in a command,
    a host IDNA cannot encode)."""
    try:
        identity(target)
    except ValueError as error:
        if not any(known.pointer == pointer for known in c.errors):  # one error per field
            c.error(pointer, f"expected an MCP server the identity can read: {error}")
        return None
    return target


def _mcp_items(c: _Checker, raw: Any, p: str, primitive: str) -> list[dict[str, str]]:
    """Approved tools (or prompts, resources, resource templates) of one MCP server, one per
    name (or URI), sorted; each pinned by its fingerprint."""
    key, noun, pattern, expected, fingerprints, fingerprint_expected = MCP_PRIMITIVES[primitive]
    first: dict[str, int] = {}
    items = []
    for i, item in enumerate(c.sequence(raw, p, f"MCP {noun}s", MAX_MCP_TOOLS)):
        q = f"{p}/{i}"
        entry = c.mapping(item, q, required=(key, "fingerprint"), optional=("description",))
        if entry is None:
            continue
        name = _present(c.string, entry, key, q, expected, pattern=pattern)
        fingerprint = _present(c.string, entry, "fingerprint", q, fingerprint_expected,
                               pattern=fingerprints)
        description = c.string(_optional(entry, "description", ""), f"{q}/description",
                               "a string of at most 4000 characters", max_len=4000)
        if name is not None and name in first:
            c.error(f"{q}/{key}", f"expected each {noun} once; got {name!r} again"
                    f" (first at {p}/{first[name]})")
        elif None not in (name, fingerprint, description):
            first[name] = i
            pinned = {key: name, "fingerprint": fingerprint}
            items.append(pinned | ({"description": description} if description else {}))
    return sorted(items, key=lambda pinned: pinned[key])


def _mcp_tools(c: _Checker, raw: Any, p: str) -> list[dict[str, str]]:
    """Approved tools of one MCP server, one per name, sorted; each pinned by its fingerprint."""
    return _mcp_items(c, raw, p, "tools")


def _mcp_extras(c: _Checker, entry: dict, q: str) -> dict[str, Any]:
    """Prompts, resources, resource templates and the server requests it allows, each only
    when given (so every spec approved before they were governed keeps its hash)."""
    extras: dict[str, Any] = {}
    for primitive in ("prompts", "resources", "resource_templates"):
        items = _mcp_items(c, _optional(entry, primitive, []), f"{q}/{primitive}", primitive)
        if items:
            extras[primitive] = items
    for flag in MCP_SERVER_REQUESTS:
        value = _optional(entry, flag, False)
        if not isinstance(value, bool):
            c.error(f"{q}/{flag}", f"expected true or false; got {_got(value)}")
        elif value:
            extras[flag] = True
    return extras


def _mcp_servers(c: _Checker, raw: Any, p: str) -> list[dict[str, Any]]:
    """Approved MCP servers, one per name, sorted: stdio ones by command, http ones by URL."""
    first: dict[str, int] = {}
    servers = []
    for i, item in enumerate(c.sequence(raw, p, "MCP servers", MAX_MCP_SERVERS)):
        q = f"{p}/{i}"
        entry = c.mapping(item, q, required=("name", "transport"),
                          optional=("url", "command", "tools", "prompts", "resources",
                                    "resource_templates", *MCP_SERVER_REQUESTS))
        if entry is None:
            continue
        name = _present(c.string, entry, "name", q, MCP_NAME_EXPECTED, pattern=_MCP_NAME)
        transport = _present(c.choice, entry, "transport", q, MCP_TRANSPORTS)
        where = {"http": "url", "stdio": "command"}.get(transport or "")
        for key in ("url", "command"):
            if transport is not None and key != where and key in entry:
                c.error(f"{q}/{key}", f"expected no {key} for transport {transport}"
                        f" (it takes {where}); got {_got(entry[key])}")
        if where is not None and where not in entry:
            c.error(f"{q}/{where}", f"missing required field {where!r} for transport {transport}")
        target = None
        if where == "url" and "url" in entry:
            target = c.string(entry["url"], f"{q}/url", "an http or https URL", max_len=2048)
            if target is not None:
                _http_url(c, target, f"{q}/url")
                target = _identified(c, url_identity, target, f"{q}/url")
        elif where == "command" and "command" in entry:
            target = c.string(entry["command"], f"{q}/command",
                              "a command line of 1 to 2048 characters", pattern=_NOT_BLANK,
                              max_len=2048)
            if target is not None:
                target = _identified(c, command_identity, target, f"{q}/command")
        tools = _mcp_tools(c, _optional(entry, "tools", []), f"{q}/tools")
        extras = _mcp_extras(c, entry, q)
        if name is not None and name in first:
            c.error(f"{q}/name", f"expected each MCP server once; got {name!r} again"
                    f" (first at {p}/{first[name]})")
        elif None not in (name, transport, target):
            first[name] = i
            servers.append({"name": name, "transport": transport, where: target, "tools": tools,
                            **extras})
    return sorted(servers, key=lambda server: server["name"])


def _enforcement(c: _Checker, raw: Any, p: str) -> dict[str, str | None]:
    """Enforcement mode for every area, areas falling back to `default`."""
    modes = c.mapping(raw, p, optional=("default", *ENFORCEMENT_AREAS)) or {}
    default = c.choice(_optional(modes, "default", "correct"), f"{p}/default", ENFORCEMENT_MODES)
    return {"default": default} | {
        area: default if modes.get(area) is None
        else c.choice(modes[area], f"{p}/{area}", ENFORCEMENT_MODES)
        for area in ENFORCEMENT_AREAS
    }


def _spec(c: _Checker, raw: Any, p: str) -> dict[str, Any]:
    """The canonical form of a spec, recording every error on the way."""
    spec = c.mapping(
        raw, p, required=("framework", "connector"),
        optional=("model", "version", "tools", "data", "actions", "limits", "grants",
                  "enforcement", "mcp_servers", "budgets", "unlisted_actions", *FLEET_FIELDS),
    )
    if spec is None:
        return {}
    # Only a spec that approves MCP servers carries the key, so every spec approved before
    # MCP servers were governed keeps its canonical form and hash.
    servers = _mcp_servers(c, _optional(spec, "mcp_servers", []), f"{p}/mcp_servers")
    return _fleet_fields(c, spec, p) | {
        "framework": _present(c.string, spec, "framework", p, "a string of 1 to 64 characters",
                              min_len=1, max_len=64),
        "connector": _connector(c, spec["connector"], f"{p}/connector")
        if "connector" in spec else None,
        "model": c.string(_optional(spec, "model", ""), f"{p}/model",
                          "a string of at most 256 characters", max_len=256),
        # YAML reads 2.3 as a float and 2.10 as 2.1: a version must be quoted to survive
        "version": c.string(_optional(spec, "version", ""), f"{p}/version",
                            'a string of at most 256 characters (quote numbers: "2.3")',
                            max_len=256),
        "tools": _tools(c, _optional(spec, "tools", []), f"{p}/tools"),
        "data": _data(c, _optional(spec, "data", []), f"{p}/data"),
        "actions": _actions(c, _optional(spec, "actions", {}), f"{p}/actions"),
        "limits": _limits(c, _optional(spec, "limits", []), f"{p}/limits"),
        "grants": _grants(c, _optional(spec, "grants", []), f"{p}/grants"),
        "enforcement": _enforcement(c, _optional(spec, "enforcement", {}), f"{p}/enforcement"),
        # Only when declared: specs without budgets keep their canonical form and hash.
        **({"budgets": budgets} if (budgets := _budgets(
            c, _optional(spec, "budgets", []), f"{p}/budgets")) else {}),
    } | ({"mcp_servers": servers} if servers else {}) | _unlisted_actions(c, spec, p)


# What a runtime decision does with an action the spec names nowhere (neither in `actions` nor
# an approved tool): deny unless the spec says allow. Canonical only when it says allow, so every
# spec approved before the field existed (and one that spells out the default) keeps its hash.
UNLISTED_ACTIONS = ("deny", "allow")


def _unlisted_actions(c: _Checker, spec: dict, p: str) -> dict[str, str]:
    """{"unlisted_actions": "allow"} when the spec opens unnamed actions, else nothing."""
    value = _optional(spec, "unlisted_actions", "deny")
    chosen = c.choice(value, f"{p}/unlisted_actions", UNLISTED_ACTIONS)
    return {"unlisted_actions": chosen} if chosen == "allow" else {}


# Optional fields that say how an agent meets the rest of the fleet (registry/toxic.py) and
# how often it must be heard from (reconciliation/silence.py). Canonical only when set, so the
# hash of every spec approved before they existed stays what it was.
FLEET_FIELDS = ("delegates_to", "heartbeat")


def _names(c: _Checker, raw: Any, p: str, noun: str, expected: str,
           pattern: re.Pattern) -> list[str]:
    """Unique names, sorted."""
    first: dict[str, int] = {}
    for i, item in enumerate(c.sequence(raw, p, noun, 200)):
        name = c.string(item, f"{p}/{i}", expected, pattern=pattern)
        if name is not None and name in first:
            c.error(f"{p}/{i}", f"expected each of the {noun} once; got {name!r} again"
                    f" (first at {p}/{first[name]})")
        elif name is not None:
            first[name] = i
    return sorted(first)


def _fleet_fields(c: _Checker, spec: dict, p: str) -> dict[str, Any]:
    """delegates_to (agents it may call) and heartbeat (the longest it may go unheard), each
    present only when given (`mcp_servers`, the other way agents meet, is `_mcp_servers`)."""
    out: dict[str, Any] = {}
    if spec.get("delegates_to") is not None:
        out["delegates_to"] = _names(c, spec["delegates_to"], f"{p}/delegates_to",
                                     "agents it may call", SLUG_EXPECTED, _SLUG)
    if spec.get("heartbeat") is not None:
        seconds = c.parsed(spec["heartbeat"], f"{p}/heartbeat", duration_seconds)
        if seconds is not None:
            out["heartbeat"] = format_duration(seconds)
    return {key: value for key, value in out.items() if value != []}


def canonicalize(spec: Any) -> dict[str, Any]:
    """The canonical spec: every key present, lists sorted, units and numbers normalised.

    Validates as it goes and raises ManifestError (pointers relative to the spec) if invalid.
    """
    c = _Checker()
    canonical = _spec(c, spec, "")
    if c.errors:
        raise ManifestError(c.errors)
    return canonical


def spec_hash(spec: Any) -> str:
    """Hex SHA-256 of the canonical JSON of the canonical spec."""
    return hashlib.sha256(canonical_json(canonicalize(spec)).encode()).hexdigest()


def validate_manifest(doc: Any) -> Manifest:
    """Validate one manifest document; ManifestError lists every problem in it."""
    c = _Checker()
    top = c.mapping(doc, "", required=("apiVersion", "kind", "metadata", "spec"))
    meta: dict[str, Any] = {}
    spec: dict[str, Any] = {}
    if top is not None:
        for key, expected in (("apiVersion", API_VERSION), ("kind", KIND)):
            if key in top and top[key] != expected:
                c.error(f"/{key}", f"expected {expected!r}; got {_got(top[key])}")
        if "metadata" in top:
            meta = _metadata(c, top["metadata"])
        if "spec" in top:
            spec = _spec(c, top["spec"], "/spec")
    if c.errors:
        raise ManifestError(c.errors)
    return Manifest(
        name=meta["name"], owner=meta["owner"], labels=meta["labels"],
        description=meta["description"], spec=spec,
        spec_sha256=hashlib.sha256(canonical_json(spec).encode()).hexdigest(),
    )


# --- YAML parsing -----------------------------------------------------------------------------

_STR_TAG = "tag:yaml.org,2002:str"


class _StrictLoader(Composer, _Parser, SafeConstructor, Resolver):
    """A safe loader (C parser, Python composer) refusing anchors, aliases and deep nesting."""

    def __init__(self, stream: str) -> None:
        _Parser.__init__(self, stream)
        Composer.__init__(self)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)
        self._depth = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node:
        """Refuse an anchor or alias before anything is built from it."""
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise ComposerError(None, None, "anchors and aliases (& and *) are not allowed",
                                event.start_mark)
        if self._depth >= MAX_DEPTH:
            raise ComposerError(None, None, f"expected at most {MAX_DEPTH} levels of nesting",
                                event.start_mark)
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


# YAML 1.1 reads 1e3 as a string; JSON and YAML 1.2 read it as a number, and JSON bodies must work.
_EXPONENT_FLOAT = re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$")
_StrictLoader.add_implicit_resolver("tag:yaml.org,2002:float", _EXPONENT_FLOAT,
                                    list("-+0123456789"))


# YAML's "\0" and "\x00" escapes (JSON's "\u0000") are valid YAML for a NUL, which no database
# text holds; a lone surrogate (no UTF-8 holds one) the YAML parser refuses itself, but a
# manifest given as data may carry one. The string itself is never echoed.
_NOT_TEXT = ("expected text a database can store (no NUL character, no lone surrogate); got "
             "a string with one")


class _DocumentBuilder:
    """Builds Python data from one composed node tree, noting each pointer's line."""

    def __init__(self, loader: _StrictLoader, document: int) -> None:
        self.loader = loader
        self.document = document
        self.errors: list[FieldError] = []
        self.line_of: dict[str, int] = {}

    def error(self, pointer: str, message: str, node: Node) -> None:
        """Record one problem at the node's line."""
        self.errors.append(FieldError(pointer, message, node.start_mark.line + 1, self.document))

    def build(self, node: Node, pointer: str) -> Any:
        """The value of a node; mapping entries are located at their key's line."""
        self.line_of.setdefault(pointer, node.start_mark.line + 1)
        if isinstance(node, MappingNode):
            if node.tag != "tag:yaml.org,2002:map":
                self.error(pointer, f"expected a plain mapping; got tag {node.tag!r}", node)
            result = {}
            for key_node, value_node in node.value:
                key = self.key(key_node, pointer)
                if key is None:
                    continue
                child = join_pointer(pointer, key)
                if key in result:
                    self.error(child, f"expected each key once; got {key!r} again"
                               f" (first on line {self.line_of[child]})", key_node)
                    continue
                self.line_of[child] = key_node.start_mark.line + 1
                result[key] = self.build(value_node, child)
            return result
        if isinstance(node, SequenceNode):
            if node.tag != "tag:yaml.org,2002:seq":
                self.error(pointer, f"expected a plain list; got tag {node.tag!r}", node)
            return [self.build(item, join_pointer(pointer, i)) for i, item in enumerate(node.value)]
        try:
            value = self.loader.construct_object(node, deep=True)
        except (yaml.YAMLError, ValueError, OverflowError) as exc:
            # e.g. 2026-13-45 matches the timestamp pattern but is no date; an unknown !tag
            problem = getattr(exc, "problem", None) or str(exc)
            self.error(pointer, f"cannot read {_got(node.value)}: {problem}", node)
            return None
        if isinstance(value, str) and not is_text(value):  # YAML's "\0" escape, say
            self.error(pointer, _NOT_TEXT, node)
            return None
        return value

    def key(self, node: Node, pointer: str) -> str | None:
        """The key if it is a plain string; YAML 1.1 reads `on`, `1` and `null` as other types."""
        if isinstance(node, ScalarNode) and node.tag == _STR_TAG:
            if not is_text(node.value):  # named by its mapping: it cannot be echoed
                self.error(pointer, f"{_NOT_TEXT} (in a key)", node)
                return None
            return node.value
        if isinstance(node, ScalarNode):
            kind = node.tag.rpartition(":")[2]
            self.error(join_pointer(pointer, node.value),
                       f"expected a string key (quote it); got {node.value!r} ({kind})", node)
        else:
            self.error(pointer, f"expected a string key; got a {node.id}", node)
        return None


def _syntax_error(exc: yaml.YAMLError, document: int) -> FieldError:
    """A parser exception as a FieldError at the line the parser gave up."""
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        message = ", ".join(part for part in (exc.context, exc.problem) if part)
        return FieldError("", message or "malformed YAML", mark.line + 1 if mark else None,
                          document)
    return FieldError("", str(exc), None, document)


def _size_error(limit: int, found: int | str, unit: str) -> ManifestTooLarge:
    """The error for a body over a limit."""
    return ManifestTooLarge([FieldError("", f"expected at most {limit} {unit}; got {found}")])


def parse_documents(
    text: str, *, max_bytes: int = MAX_BYTES, max_documents: int = MAX_DOCUMENTS
) -> list[ParsedDocument]:
    """Parse YAML or JSON, possibly many `---` documents; empty documents are skipped.

    ParsedDocument.index counts the returned (non-empty) documents from 0.
    """
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        raise _size_error(max_bytes, size, "bytes")
    if "\t" in text:
        # JSON indented with tabs is not YAML, but in valid JSON a raw tab can only be
        # whitespace between tokens, so spaces keep its meaning and its line numbers.
        try:
            json.loads(text)
            text = text.replace("\t", " ")
        except (ValueError, RecursionError):
            pass
    # YAML's own check, done here so that both parsers report the character and line alike
    if bad := _NON_PRINTABLE.search(text):
        line = text.count("\n", 0, bad.start()) + 1
        raise ManifestError([FieldError(
            "", f"expected printable characters; got #x{ord(bad[0]):04x}", line
        )])
    documents: list[ParsedDocument] = []
    errors: list[FieldError] = []
    loader = _StrictLoader(text)
    try:
        while True:
            try:
                if not loader.check_node():
                    break
                node = loader.get_node()
            except yaml.YAMLError as exc:
                errors.append(_syntax_error(exc, len(documents)))
                break
            builder = _DocumentBuilder(loader, len(documents))
            data = builder.build(node, "")
            loader.constructed_objects = {}
            errors.extend(builder.errors)
            if data is None and not builder.errors:
                continue
            if len(documents) >= max_documents:
                raise _size_error(max_documents, "more", "documents")
            documents.append(ParsedDocument(len(documents), data, builder.line_of))
    finally:
        loader.dispose()
    if errors:
        raise ManifestError(errors)
    return documents


def locate(errors: list[FieldError], document: ParsedDocument) -> list[FieldError]:
    """The errors with the document index and the line of each pointer (or its nearest parent)."""
    located = []
    for error in errors:
        pointer = error.pointer
        while pointer not in document.line_of and pointer:
            pointer = pointer.rpartition("/")[0]
        located.append(dataclasses.replace(
            error, line=document.line_of.get(pointer), document=document.index
        ))
    return located


def validate_documents(
    text: str, *, max_bytes: int = MAX_BYTES, max_documents: int = MAX_DOCUMENTS
) -> list[Manifest]:
    """Parse and validate every document; one ManifestError carries all errors with lines.

    With more than one document each message starts with `document N: ` (N from 0).
    """
    documents = parse_documents(text, max_bytes=max_bytes, max_documents=max_documents)
    return validate_parsed(documents)


def validate_parsed(documents: list[ParsedDocument]) -> list[Manifest]:
    """Validate parsed documents; one ManifestError carries all errors with their lines."""
    if not documents:
        raise ManifestError([FieldError("", "expected at least one manifest document; got none")])
    manifests: list[Manifest] = []
    errors: list[FieldError] = []
    first: dict[str, int] = {}
    for document in documents:
        try:
            manifest = validate_manifest(document.data)
        except ManifestError as exc:
            errors.extend(locate(exc.errors, document))
            continue
        if manifest.name in first:
            # two versions of one agent in one upload: which one to propose would be a guess
            errors.extend(locate([FieldError(
                "/metadata/name", f"expected each agent once per upload; got {manifest.name!r}"
                f" again (first in document {first[manifest.name]})")], document))
        first.setdefault(manifest.name, document.index)
        manifests.append(manifest)
    if errors:
        if len(documents) > 1:
            errors = [
                dataclasses.replace(e, message=f"document {e.document}: {e.message}")
                for e in errors
            ]
        raise ManifestError(errors)
    return manifests


# --- writing ----------------------------------------------------------------------------------


class _Dumper(yaml.SafeDumper):
    """SafeDumper that never writes anchors (our own loader refuses them)."""

    def ignore_aliases(self, data: Any) -> bool:
        """Always write shared objects out in full."""
        return True


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    """Double-quote strings holding NEL or Unicode line separators: other styles fold them."""
    style = '"' if any(ch in value for ch in "\x85\u2028\u2029") else None
    return dumper.represent_scalar(_STR_TAG, value, style=style)


_Dumper.add_representer(str, _represent_str)
# The writer resolves plain scalars as our loader does, so a string our loader would read as a
# number (`0e0`) is quoted on the way out.
_Dumper.add_implicit_resolver("tag:yaml.org,2002:float", _EXPONENT_FLOAT, list("-+0123456789"))


def manifest_to_yaml(manifest: Manifest) -> str:
    """A full manifest document that validates back to an equal Manifest."""
    metadata: dict[str, Any] = {"name": manifest.name, "owner": manifest.owner}
    if manifest.labels:
        metadata["labels"] = dict(manifest.labels)
    if manifest.description:
        metadata["description"] = manifest.description
    document = {"apiVersion": API_VERSION, "kind": KIND, "metadata": metadata,
                "spec": manifest.spec}
    return yaml.dump(document, Dumper=_Dumper, sort_keys=False, allow_unicode=True,
                     default_flow_style=False)
