"""spec.unlisted_actions: what a runtime decision does with an action the spec names nowhere.
Canonical only when it opens them, so every spec approved before it existed keeps its hash."""

import pytest

from registry.manifest import ManifestError, canonicalize, spec_hash

SPEC = {"framework": "langgraph", "connector": {"type": "sandbox"}, "tools": ["orders.lookup"],
        "actions": {"payments.refund": {"approval_above": 500}}}


def test_absent_or_deny_is_the_same_spec_with_the_same_hash():
    assert "unlisted_actions" not in canonicalize(SPEC)
    assert canonicalize({**SPEC, "unlisted_actions": "deny"}) == canonicalize(SPEC)
    assert spec_hash({**SPEC, "unlisted_actions": "deny"}) == spec_hash(SPEC)


def test_allow_is_kept_and_changes_the_hash():
    opened = canonicalize({**SPEC, "unlisted_actions": "allow"})
    assert opened["unlisted_actions"] == "allow"
    assert spec_hash({**SPEC, "unlisted_actions": "allow"}) != spec_hash(SPEC)


@pytest.mark.parametrize("value", ["Allow", "yes", True, 1, ["allow"]])
def test_anything_else_is_an_error_naming_the_field(value):
    with pytest.raises(ManifestError) as error:
        canonicalize({**SPEC, "unlisted_actions": value})
    assert "/unlisted_actions" in str(error.value.details())
