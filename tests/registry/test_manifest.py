"""The manifest schema: parsing, every error at its pointer and line, the canonical spec."""

import datetime as dt
import hashlib
import json
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from registry.manifest import (
    ACCESS_LEVELS,
    ENFORCEMENT_AREAS,
    ENFORCEMENT_MODES,
    LIMIT_KINDS,
    TOOL_EXPECTED,
    FieldError,
    Manifest,
    ManifestError,
    ManifestTooLarge,
    canonical_json,
    canonicalize,
    duration_seconds,
    join_pointer,
    manifest_to_yaml,
    parse_documents,
    spec_hash,
    validate_documents,
    validate_manifest,
)

# The refund agent exactly as DESIGN.md §4 shows it.
REFUND_AGENT = """\
apiVersion: governance/v1
kind: Agent
metadata:
  name: refund-agent            # unique slug: lowercase letters, digits, '-', at most 63 characters
  owner: alice                  # username of the owning person
  labels: {team: payments, env: prod}
  description: Issues refunds for damaged orders
spec:
  framework: langgraph          # free text (langgraph, crewai, openai-agents, custom ...)
  connector: {type: sandbox}    # push | http ({type: http, url: ..., secret_env: NAME}) | sandbox
  model: gpt-4.1
  version: "2.3.0"
  tools: [orders.lookup, payments.refund]
  data:
    - {resource: orders_db, access: read}      # access: read | write | admin (write implies read)
    - {resource: payments, access: write}
  actions:
    payments.refund: {approval_above: 500, max: 5000}   # above 500 needs a human; above 5000 never
  limits:
    - {resource: customers_db, max_calls: 40, per: 1h}
    - {resource: customers_db, max_same_record: 3, per: 1h}
  grants:                       # time-bounded extras; gone from the desired state once expired
    - {resource: crm, access: read, expires_at: "2026-12-04T00:00:00Z", reason: "Q4 audit"}
  enforcement:                  # per area: correct | block | escalate | log
    default: correct
    actions: escalate
    behaviour: block
"""

REFUND_AGENT_SPEC = {
    "framework": "langgraph",
    "connector": {"type": "sandbox"},
    "model": "gpt-4.1",
    "version": "2.3.0",
    "tools": ["orders.lookup", "payments.refund"],
    "data": [
        {"resource": "orders_db", "access": "read"},
        {"resource": "payments", "access": "write"},
    ],
    "actions": {"payments.refund": {"approval_above": 500, "max": 5000}},
    "limits": [
        {"resource": "customers_db", "max_calls": 40, "per": "1h"},
        {"resource": "customers_db", "max_same_record": 3, "per": "1h"},
    ],
    "grants": [
        {
            "resource": "crm",
            "access": "read",
            "expires_at": "2026-12-04T00:00:00Z",
            "reason": "Q4 audit",
        }
    ],
    "enforcement": {
        "default": "correct",
        "config": "correct",
        "actions": "escalate",
        "behaviour": "block",
    },
}

# Stored hashes must never change meaning: this pins the canonical form of the example.
REFUND_AGENT_SHA256 = "7ec0f3e58930fcf83d0790fde54f3bced6f71e3dcc79071bd1db62dc75da70c9"


def agent(
    *, name: str = "refund-agent", top: str = "", metadata: str = "",
    connector: str = "{type: sandbox}", spec: str = "",
) -> str:
    """A minimal manifest for alice's refund agent with extra YAML lines spliced in."""
    return (
        "apiVersion: governance/v1\n"
        "kind: Agent\n"
        f"{top}"
        "metadata:\n"
        f"  name: {name}\n"
        "  owner: alice\n"
        f"{metadata}"
        "spec:\n"
        "  framework: langgraph\n"
        f"  connector: {connector}\n"
        f"{spec}"
    )


def refused(text: str, **limits: int) -> list[FieldError]:
    """The errors validate_documents reports for a body it must refuse."""
    with pytest.raises(ManifestError) as caught:
        validate_documents(text, **limits)
    return caught.value.errors


BILLION_LAUGHS = """\
a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]
b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]
d: [*c, *c, *c, *c, *c, *c, *c, *c, *c]
"""

REFUND = "  actions:\n    payments.refund: {approval_above: %s, max: %s}\n"
LIMIT = "  limits:\n    - {resource: customers_db, max_calls: 40, per: %s}\n"
GRANT = "  grants:\n    - {resource: crm, access: read, expires_at: %s, reason: Q4 audit}\n"

# (body, [(pointer, a fragment of the message saying what was expected), ...])
BAD_MANIFESTS = [
    pytest.param(agent(top="status: running\n"), [
        ("/status", "unknown field 'status'; expected one of apiVersion, kind, metadata, spec"),
    ], id="unknown-top-level-field"),
    pytest.param(agent(metadata="  team: payments\n"), [
        ("/metadata/team", "unknown field 'team'; expected one of name, owner, labels"),
    ], id="unknown-metadata-field"),
    pytest.param(agent(spec="  replicas: 3\n"), [
        ("/spec/replicas", "unknown field 'replicas'; expected one of framework, connector"),
    ], id="unknown-spec-field"),
    pytest.param(agent(spec="  data:\n    - {resource: orders_db, access: read, scope: all}\n"), [
        ("/spec/data/0/scope", "unknown field 'scope'; expected one of resource, access"),
    ], id="unknown-data-entry-field"),
    pytest.param(agent(name="Refund-Agent"), [
        ("/metadata/name", "expected a slug of 1 to 63 lowercase letters, digits and '-'"),
    ], id="slug-uppercase"),
    pytest.param(agent(name="r" * 64), [
        ("/metadata/name", "(64 characters)"),
    ], id="slug-too-long"),
    pytest.param(agent(name="-refund"), [
        ("/metadata/name", "starting and ending with a letter or digit; got '-refund'"),
    ], id="slug-leading-dash"),
    pytest.param(agent(spec=LIMIT % "1 hour"), [
        ("/spec/limits/0/per", "expected a duration: a whole number and a unit s, m, h or d"),
    ], id="duration-in-words"),
    pytest.param(agent(spec=LIMIT % "0h"), [
        ("/spec/limits/0/per", "expected a positive duration, like 30s, 15m, 1h or 1d; got '0h'"),
    ], id="duration-zero"),
    pytest.param(agent(spec=LIMIT % "31d"), [
        ("/spec/limits/0/per", "expected a duration of at most 30d; got '31d'"),
    ], id="duration-over-30-days"),
    pytest.param(agent(spec=GRANT % "2026-12-04 00:00:00"), [
        ("/spec/grants/0/expires_at", "timestamp without a zone: 2026-12-04 00:00:00"),
    ], id="yaml-datetime-without-zone"),
    pytest.param(agent(spec=GRANT % '"2026-12-04T00:00:00"'), [
        ("/spec/grants/0/expires_at", "timestamp without a zone: 2026-12-04T00:00:00"),
    ], id="string-timestamp-without-zone"),
    pytest.param(agent(spec=GRANT % "2026-12-04"), [
        ("/spec/grants/0/expires_at", "with a zone, like 2026-12-04T00:00:00Z; got date 2026"),
    ], id="date-is-not-a-timestamp"),
    pytest.param(agent(spec=REFUND % (6000, 5000)), [
        ("/spec/actions/payments.refund/approval_above", "expected at most max (5000); got 6000"),
    ], id="approval-above-max"),
    pytest.param(agent(spec="  tools: [orders.lookup, payments.refund, orders.lookup]\n"), [
        ("/spec/tools/2", "expected each tool once; got 'orders.lookup' again"),
    ], id="duplicate-tool"),
    pytest.param(agent(spec="  data:\n    - {resource: payments, access: read}\n"
                       "    - {resource: payments, access: write}\n"), [
        ("/spec/data/1/resource", "expected each resource once; got 'payments' again"),
    ], id="duplicate-data-resource"),
    pytest.param(agent(spec="  data:\n    - {resource: payments, access: delete}\n"), [
        ("/spec/data/0/access", "expected one of read, write, admin; got 'delete'"),
    ], id="unknown-access"),
    pytest.param(agent(spec="  tools: x\n"), [
        ("/spec/tools", "expected a list of tools; got 'x'"),
    ], id="tools-not-a-list"),
    pytest.param(agent(spec="  version: 2.3\n"), [
        ("/spec/version", 'expected a string of at most 256 characters (quote numbers: "2.3")'),
    ], id="version-as-number"),
    pytest.param(agent(connector="{type: http, secret_env: REFUND_AGENT_TOKEN}"), [
        ("/spec/connector/url", "missing required field 'url' for connector type http"),
    ], id="http-connector-without-url"),
    pytest.param(agent(connector="{type: http, url: 'ftp://agents.example', secret_env: x}"), [
        ("/spec/connector/url", "expected an http or https URL with a host; got 'ftp://"),
        ("/spec/connector/secret_env", "expected a connector secret name"),
    ], id="http-connector-bad-url-and-secret"),
    pytest.param(agent(connector="{type: push, url: 'https://agents.example'}"), [
        ("/spec/connector/url", "expected no url: only connector type http takes one"),
    ], id="push-connector-with-url"),
    pytest.param(agent(spec="  actions:\n    refunds/large: {max: 10}\n"), [
        ("/spec/actions/refunds~1large", "expected an action name of 1 to 128 lowercase letters"),
    ], id="action-name-escaped-in-pointer"),
    pytest.param(agent(spec="  actions:\n    payments.refund: {}\n"), [
        ("/spec/actions/payments.refund", "expected at least one of approval_above, max"),
    ], id="action-rule-empty"),
    pytest.param(agent(spec=REFUND % (".nan", "1e13")), [
        ("/spec/actions/payments.refund/approval_above", "expected a number >= 0 and at most 1e12"),
        ("/spec/actions/payments.refund/max", "and at most 1e12; got 10000000000000.0"),
    ], id="nan-and-huge-numbers"),
    pytest.param(agent(spec=REFUND % ("true", 0)), [
        ("/spec/actions/payments.refund/approval_above", "expected a number >= 0; got true"),
        ("/spec/actions/payments.refund/max", "expected a number > 0; got 0"),
    ], id="bool-is-not-a-number"),
    pytest.param(agent(spec="  limits:\n    - {resource: customers_db, max_calls: 40,"
                       " max_same_record: 3, per: 1h}\n"
                       "    - {resource: customers_db, max_calls: 2.5, per: 1h}\n"), [
        ("/spec/limits/0", "expected exactly one of max_calls, max_same_record; got both"),
        ("/spec/limits/1/max_calls", "expected an integer >= 1; got 2.5"),
    ], id="limit-kinds"),
    pytest.param(agent(spec="  limits:\n    - {resource: customers_db, max_calls: 40, per: 1h}\n"
                       "    - {resource: customers_db, max_calls: 50, per: 60m}\n"), [
        ("/spec/limits/1", "expected one max_calls limit per resource; got a second one"),
    ], id="duplicate-limit"),
    pytest.param(agent(spec='  grants:\n    - {resource: crm, access: read,'
                       ' expires_at: "2026-12-04T00:00:00Z", reason: " "}\n'), [
        ("/spec/grants/0/reason", "expected a non-empty reason"),
    ], id="grant-without-reason"),
    pytest.param(agent(spec="  enforcement: {default: ignore, actions: escalate}\n"), [
        ("/spec/enforcement/default", "expected one of correct, block, escalate, log; got 'ign"),
    ], id="unknown-enforcement-mode"),
    pytest.param(agent(metadata="  labels: {team: payments, -bad: x, env: 'prod env'}\n"), [
        ("/metadata/labels/-bad", "expected a label key"),
        ("/metadata/labels/env", "expected a label value: empty, or 1 to 63 letters"),
    ], id="bad-labels"),
    pytest.param(
        "apiVersion: governance/v2\nkind: Agent\nmetadata: {owner: alice}\nspec: []\n", [
            ("/apiVersion", "expected 'governance/v1'; got 'governance/v2'"),
            ("/metadata/name", "missing required field 'name'"),
            ("/spec", "expected a mapping; got a list"),
        ], id="every-error-is-collected"),
    pytest.param(BILLION_LAUGHS, [
        ("", "anchors and aliases (& and *) are not allowed"),
    ], id="alias-bomb"),
    pytest.param(agent(metadata="  name: payments-agent\n"), [
        ("/metadata/name", "expected each key once; got 'name' again (first on line 4)"),
    ], id="duplicate-mapping-key"),
    pytest.param(agent(metadata="  labels: {on: 'yes', 1: one}\n"), [
        ("/metadata/labels/on", "expected a string key (quote it); got 'on' (bool)"),
        ("/metadata/labels/1", "expected a string key (quote it); got '1' (int)"),
    ], id="non-string-keys"),
]


@pytest.mark.parametrize(("body", "expected"), BAD_MANIFESTS)
def test_a_bad_manifest_is_refused_at_the_right_pointer(body: str, expected: list) -> None:
    errors = refused(body)
    assert [error.pointer for error in errors] == [pointer for pointer, _ in expected]
    for error, (_, fragment) in zip(errors, expected, strict=True):
        assert fragment in error.message
        assert error.line is not None


def test_errors_carry_the_line_of_their_pointer() -> None:
    body = agent(spec="  tools: [orders.lookup]\n  data:\n"
                      "    - {resource: orders_db, access: all}\n")
    [error] = refused(body)
    assert error == FieldError(
        "/spec/data/0/access", "expected one of read, write, admin; got 'all'", line=11
    )


def test_a_missing_field_is_shown_at_its_parents_line() -> None:
    [error] = refused("apiVersion: governance/v1\nkind: Agent\nmetadata:\n  name: refund-agent\n"
                      "spec: {framework: langgraph, connector: {type: sandbox}}\n")
    assert (error.pointer, error.line) == ("/metadata/owner", 3)


def test_malformed_yaml_reports_the_line_where_parsing_failed() -> None:
    body = agent(spec="  tools: [orders.lookup\n  data: []\n")
    [error] = refused(body)
    assert error.pointer == ""
    assert error.line == 10
    assert "expected ',' or ']'" in error.message


def test_bad_indentation_reports_its_line() -> None:
    [error] = refused(agent(metadata="   description: too deep\n"))
    assert error.line == 6
    assert error.message.startswith("mapping values are not allowed")


def test_oversize_body_is_too_large() -> None:
    body = agent(metadata=f"  description: {'x' * 1_048_576}\n")
    with pytest.raises(ManifestTooLarge) as caught:
        parse_documents(body)
    [error] = caught.value.errors
    assert error.pointer == ""
    assert error.message == f"expected at most 1048576 bytes; got {len(body)}"


def test_the_size_limit_counts_utf8_bytes() -> None:
    body = agent(metadata="  description: café\n")
    parse_documents(body, max_bytes=len(body.encode()))
    with pytest.raises(ManifestTooLarge):
        parse_documents(body, max_bytes=len(body))


def test_too_many_documents_is_too_large() -> None:
    with pytest.raises(ManifestTooLarge) as caught:
        parse_documents("---\n".join(["a: 1\n"] * 4), max_documents=3)
    assert caught.value.errors == [FieldError("", "expected at most 3 documents; got more")]


@pytest.mark.parametrize("depth", [33, 100_000])
def test_deep_nesting_is_refused_before_it_reaches_the_stack_limit(depth: int) -> None:
    [error] = refused("a:\n  " + "[" * depth + "]" * depth)
    assert error.line == 2
    assert "nesting" in error.message


def test_control_characters_are_refused_at_their_line() -> None:
    assert refused("a: 1\nb: \x07\n") == [
        FieldError("", "expected printable characters; got #x0007", line=2)
    ]


def test_values_yaml_cannot_build_are_errors_at_their_pointer() -> None:
    errors = refused("a: !!python/object/apply:os.system [echo]\nb: 2026-13-45\nc: !!set {x}\n")
    assert [(error.pointer, error.line) for error in errors] == [("/a", 1), ("/b", 2), ("/c", 3)]
    assert "month must be in 1..12" in errors[1].message


def test_example_from_design_validates_to_the_exact_canonical_spec() -> None:
    [manifest] = validate_documents(REFUND_AGENT)
    assert manifest == Manifest(
        name="refund-agent",
        owner="alice",
        labels={"env": "prod", "team": "payments"},
        description="Issues refunds for damaged orders",
        spec=REFUND_AGENT_SPEC,
        spec_sha256=REFUND_AGENT_SHA256,
    )
    assert manifest.spec_sha256 == hashlib.sha256(
        canonical_json(REFUND_AGENT_SPEC).encode()
    ).hexdigest()
    assert spec_hash(yaml.safe_load(REFUND_AGENT)["spec"]) == REFUND_AGENT_SHA256


def test_canonical_json_is_compact_sorted_and_keeps_unicode() -> None:
    assert canonical_json({"b": [1, 2.5], "a": "café"}) == '{"a":"café","b":[1,2.5]}'


def test_canonical_form_fills_defaults_and_normalises_units_numbers_and_zones() -> None:
    spec = {
        "framework": "crewai",
        "connector": {"type": "http", "url": "https://agents.example/refund",
                      "secret_env": "REFUND_AGENT_TOKEN"},
        "actions": {"payments.refund": {"max": 5000.0}, "orders.cancel": {"approval_above": 0.5}},
        "limits": [
            {"resource": "orders_db", "max_same_record": 3, "per": "90m"},
            {"resource": "customers_db", "max_calls": 40.0, "per": "3600s"},
            {"resource": "customers_db", "max_same_record": 2, "per": "24h"},
        ],
        "grants": [
            {"resource": "crm", "access": "read", "expires_at": "2026-12-04T01:00:00.5+01:00",
             "reason": "Q4 audit"},
            {"resource": "crm", "access": "write",
             "expires_at": dt.datetime(2026, 12, 3, 20, tzinfo=dt.timezone(dt.timedelta(hours=-4))),
             "reason": "Q4 audit"},
        ],
        "enforcement": {"default": "log", "config": "block"},
    }
    assert canonicalize(spec) == {
        "framework": "crewai",
        "connector": {"type": "http", "url": "https://agents.example/refund",
                      "secret_env": "REFUND_AGENT_TOKEN"},
        "model": "",
        "version": "",
        "tools": [],
        "data": [],
        "actions": {
            "orders.cancel": {"approval_above": 0.5, "max": None},
            "payments.refund": {"approval_above": None, "max": 5000},
        },
        "limits": [
            {"resource": "customers_db", "max_calls": 40, "per": "1h"},
            {"resource": "customers_db", "max_same_record": 2, "per": "1d"},
            {"resource": "orders_db", "max_same_record": 3, "per": "90m"},
        ],
        "grants": [
            {"resource": "crm", "access": "write", "expires_at": "2026-12-04T00:00:00Z",
             "reason": "Q4 audit"},
            {"resource": "crm", "access": "read", "expires_at": "2026-12-04T00:00:00.500000Z",
             "reason": "Q4 audit"},
        ],
        "enforcement": {"default": "log", "config": "block", "actions": "log", "behaviour": "log"},
    }


def test_canonicalize_refuses_an_invalid_spec_with_pointers_into_the_spec() -> None:
    with pytest.raises(ManifestError) as caught:
        canonicalize({"framework": "", "connector": {"type": "sandbox"}, "tools": ["A"]})
    assert [error.pointer for error in caught.value.errors] == ["/framework", "/tools/0"]


@pytest.mark.parametrize(("text", "seconds"), [
    ("30s", 30), ("15m", 900), ("1h", 3600), ("1d", 86400), ("3600s", 3600), ("30d", 2592000),
])
def test_duration_seconds(text: str, seconds: int) -> None:
    assert duration_seconds(text) == seconds


@pytest.mark.parametrize("text", ["1 hour", "0h", "31d", "1w", "h", "-1h", "1.5h", 60, None])
def test_duration_seconds_refuses_what_is_not_a_duration(text: Any) -> None:
    with pytest.raises(ValueError, match="expected"):
        duration_seconds(text)


def test_json_pointers_escape_tilde_and_slash() -> None:
    assert join_pointer("/spec/actions", "a/b~c") == "/spec/actions/a~1b~0c"


MULTI = """\
# alice's agents
apiVersion: governance/v1
kind: Agent
metadata: {name: refund-agent, owner: alice}
spec: {framework: langgraph, connector: {type: sandbox}}
---
---
apiVersion: governance/v1
kind: Agent
metadata:
  name: triage-agent
  owner: alice
spec:
  framework: crewai
  connector: {type: push}
  tools: [tickets.read]
"""


def test_many_documents_skip_empty_ones_and_keep_source_lines() -> None:
    first, second = parse_documents(MULTI)
    assert (first.index, second.index) == (0, 1)
    assert first.line_of["/metadata/name"] == 4
    assert first.line_of[""] == 2
    assert second.data["metadata"]["name"] == "triage-agent"
    assert second.line_of["/metadata/name"] == 11
    assert second.line_of["/spec/tools/0"] == 16
    assert [m.name for m in validate_documents(MULTI)] == ["refund-agent", "triage-agent"]


def test_errors_in_many_documents_name_the_document_and_its_line() -> None:
    errors = refused(MULTI.replace("tickets.read", "Tickets").replace("langgraph", "[x]"))
    assert errors == [
        FieldError("/spec/framework", "document 0: expected a string of 1 to 64 characters;"
                   " got a list", line=5, document=0),
        FieldError("/spec/tools/0", f"document 1: expected {TOOL_EXPECTED}; got 'Tickets'",
                   line=16, document=1),
    ]


def test_the_same_agent_twice_in_one_upload_is_refused() -> None:
    body = MULTI.replace("triage-agent", "refund-agent")
    [error] = refused(body)
    assert (error.pointer, error.line, error.document) == ("/metadata/name", 11, 1)


def test_an_empty_body_is_refused() -> None:
    assert parse_documents("# nothing\n---\n") == []
    assert refused("") == [FieldError("", "expected at least one manifest document; got none")]


def test_json_bodies_are_yaml_even_tab_indented() -> None:
    document = yaml.safe_load(REFUND_AGENT)
    document["spec"]["grants"][0]["expires_at"] = "2026-12-04T00:00:00Z"
    for indent in (None, 2, "\t"):
        [manifest] = validate_documents(json.dumps(document, indent=indent))
        assert manifest.spec == REFUND_AGENT_SPEC


def test_manifest_to_yaml_round_trips_the_example() -> None:
    [manifest] = validate_documents(REFUND_AGENT)
    text = manifest_to_yaml(manifest)
    assert validate_manifest(yaml.safe_load(text)) == manifest
    assert validate_documents(text) == [manifest]

# --- property tests ----------------------------------------------------------------------------

names = st.from_regex(r"[a-z0-9][a-z0-9_.-]{0,12}", fullmatch=True)
resources = st.from_regex(r"[a-z][a-z0-9_:/.-]{0,10}", fullmatch=True)
accesses = st.sampled_from(ACCESS_LEVELS)
modes = st.sampled_from(ENFORCEMENT_MODES)
halves = st.integers(1, 2_000_000).map(lambda n: n / 2)  # exact floats, some integral
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


@st.composite
def action_rules(draw: st.DrawFn) -> tuple[float | None, float | None]:
    """(approval_above, max) with at least one set and approval_above <= max."""
    most = draw(st.none() | halves)
    above = draw(st.none() | st.integers(0, int(most or 10**6)).map(float))
    return (above, most) if (above, most) != (None, None) else (0.0, None)


@st.composite
def spec_meanings(draw: st.DrawFn) -> dict[str, Any]:
    """What a spec means, independent of how it is spelled."""
    return {
        "model": draw(st.sampled_from(["", "gpt-4.1"])),
        "version": draw(st.sampled_from(["", "2.3", "2.3.0", "yes", "null"])),
        "tools": draw(st.lists(names, unique=True, max_size=5)),
        "data": draw(st.dictionaries(resources, accesses, max_size=4)),
        "actions": draw(st.dictionaries(names, action_rules(), max_size=3)),
        "limits": draw(st.dictionaries(
            st.tuples(resources, st.sampled_from(LIMIT_KINDS)),
            st.tuples(st.integers(1, 1000), st.sampled_from(list(UNITS.values())),
                      st.integers(1, 30)).map(lambda t: (t[0], t[1] * t[2])),
            max_size=4,
        )),
        "grants": draw(st.lists(st.tuples(
            resources, accesses,
            st.datetimes(dt.datetime(2000, 1, 1), dt.datetime(2100, 1, 1),
                         timezones=st.just(dt.UTC)),
            st.sampled_from(["Q4 audit", "incident 42", "café ☕"]),
        ), max_size=4)),
        "enforcement": draw(st.fixed_dictionaries(
            {"default": modes}, optional={area: modes for area in ENFORCEMENT_AREAS}
        )),
    }


def spelled(meaning: dict[str, Any], draw: st.DrawFn) -> dict[str, Any]:
    """One of the many ways to write a spec meaning in a manifest."""

    def shuffled(items: list) -> list:
        return list(draw(st.permutations(items)))

    def number(value: float | int) -> float | int:
        if draw(st.booleans()):
            return float(value)
        return int(value) if value == int(value) else value

    def duration(seconds: int) -> str:
        unit = draw(st.sampled_from([u for u, size in UNITS.items() if seconds % size == 0]))
        return f"{seconds // UNITS[unit]}{unit}"

    def instant(when: dt.datetime) -> dt.datetime | str:
        zone = dt.timezone(dt.timedelta(minutes=draw(st.integers(-12 * 60, 14 * 60))))
        local = when.astimezone(zone)
        return draw(st.sampled_from([local, local.isoformat(), when.isoformat()[:-6] + "Z"]))

    def rule(above: float | None, most: float | None) -> dict[str, Any]:
        spelled_rule = {"approval_above": above, "max": most}
        return {k: number(v) for k, v in spelled_rule.items() if v is not None} | (
            {k: None for k, v in spelled_rule.items() if v is None} if draw(st.booleans()) else {}
        )

    default = meaning["enforcement"]["default"]
    enforcement = {area: mode for area, mode in meaning["enforcement"].items()
                   if area == "default" or mode != default or draw(st.booleans())}
    if default == "correct" and draw(st.booleans()):
        del enforcement["default"]
    spec = {
        "framework": "langgraph",
        "connector": {"type": "sandbox"},
        "model": meaning["model"],
        "version": meaning["version"],
        "tools": shuffled(meaning["tools"]),
        "data": [{"resource": r, "access": a} for r, a in shuffled(list(meaning["data"].items()))],
        "actions": {name: rule(*r) for name, r in shuffled(list(meaning["actions"].items()))},
        "limits": [{"resource": resource, kind: number(count), "per": duration(seconds)}
                   for (resource, kind), (count, seconds)
                   in shuffled(list(meaning["limits"].items()))],
        "grants": [{"resource": r, "access": a, "expires_at": instant(when), "reason": why}
                   for r, a, when, why in shuffled(meaning["grants"])],
        "enforcement": enforcement,
    }
    # optional fields at their default may be left out; key order is the writer's choice
    spec = {key: value for key, value in spec.items()
            if value or key in ("framework", "connector") or draw(st.booleans())}
    return dict(shuffled(list(spec.items())))


@settings(max_examples=200, deadline=None)
@given(meaning=spec_meanings(), data=st.data())
def test_every_spelling_of_one_meaning_has_one_canonical_form_and_hash(
    meaning: dict[str, Any], data: st.DataObject
) -> None:
    first, second = spelled(meaning, data.draw), spelled(meaning, data.draw)
    assert canonicalize(first) == canonicalize(second)
    assert spec_hash(first) == spec_hash(second)


@settings(max_examples=200, deadline=None)
@given(meaning=spec_meanings(), data=st.data())
def test_canonicalize_is_idempotent(meaning: dict[str, Any], data: st.DataObject) -> None:
    canonical = canonicalize(spelled(meaning, data.draw))
    assert canonicalize(canonical) == canonical
    assert canonical_json(canonicalize(canonical)) == canonical_json(canonical)


label_keys = st.from_regex(
    r"(?:[a-z0-9]{1,5}(?:\.[a-z0-9]{1,5})?/)?[A-Za-z0-9](?:[A-Za-z0-9._-]{0,8}[A-Za-z0-9])?",
    fullmatch=True,
)
label_values = st.from_regex(r"(?:[A-Za-z0-9](?:[A-Za-z0-9._-]{0,8}[A-Za-z0-9])?)?", fullmatch=True)


@settings(max_examples=200, deadline=None)
@given(
    meaning=spec_meanings(), data=st.data(),
    labels=st.dictionaries(label_keys, label_values, max_size=4),
    # text a database holds: a NUL or a lone surrogate is refused (tests/test_bad_input.py)
    description=st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
                        max_size=80),
)
def test_manifest_to_yaml_round_trips(
    meaning: dict[str, Any], data: st.DataObject, labels: dict[str, str], description: str
) -> None:
    manifest = validate_manifest({
        "apiVersion": "governance/v1", "kind": "Agent",
        "metadata": {"name": "refund-agent", "owner": "alice", "labels": labels,
                     "description": description},
        "spec": spelled(meaning, data.draw),
    })
    text = manifest_to_yaml(manifest)
    assert validate_manifest(yaml.safe_load(text)) == manifest
    assert validate_documents(text) == [manifest]


@pytest.mark.parametrize("bad", ["a\x00b", "a\ud800b"])
def test_a_manifest_given_as_data_refuses_text_no_database_holds(bad: str) -> None:
    """The same bar when a manifest arrives already parsed (a proposal's spec, the demo's
    files): a NUL or a lone surrogate is refused at its pointer, never echoed."""
    with pytest.raises(ManifestError) as caught:
        validate_manifest({"apiVersion": "governance/v1", "kind": "Agent",
                           "metadata": {"name": "refund-agent", "owner": "alice",
                                        "description": bad},
                           "spec": {"tools": [f"orders{bad}"]}})
    found = {(error.pointer, error.message) for error in caught.value.errors}
    assert {pointer for pointer, _ in found} >= {"/metadata/description", "/spec/tools/0"}
    assert all(bad not in message for _, message in found)
