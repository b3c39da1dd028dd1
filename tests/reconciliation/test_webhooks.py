"""The decision webhook rules as pure functions: which hosts and ports, and the signature both
sides use."""

import pytest
from agentgov.webhooks import BadSignature, verify

from config.outbound import listed
from reconciliation.webhooks import signature


@pytest.mark.parametrize("url, allowed", [
    ("https://hooks.corp.example/decided", True),
    ("http://a.b.corp.example/x", True),
    ("http://a.b.corp.example:8443/x", False),         # no port listed: the scheme's default
    ("https://ops.internal:8443/x", True),
    ("https://ops.internal/x", False),
    ("https://HOOKS.CORP.EXAMPLE/x", True),
    ("https://corp.example/x", False),                 # the glob needs a subdomain
    ("https://corp.example.attacker.test/x", False),
    ("https://user:pw@hooks.corp.example/x", False),   # credentials in a URL: refused
    ("ftp://hooks.corp.example/x", False),
    ("http://127.0.0.1/x", False),
    ("http://[::1/x", False),                           # unparsable
    ("", False),
])
def test_only_listed_hosts_over_http_are_allowed(url, allowed):
    assert listed(url, ["*.corp.example", "ops.internal:8443"]) is allowed


def test_no_patterns_means_no_webhooks():
    assert not listed("https://hooks.corp.example/x", [])


def test_a_signature_checks_out_only_for_its_body_secret_and_time():
    body = b'{"id": "d1", "outcome": "deny"}'
    headers = {"x-agentgov-signature": signature(body, "k", 1_700_000_000)}
    assert verify(body, headers, "k", now=1_700_000_100) == {"id": "d1", "outcome": "deny"}
    for wrong_body, secret, now, reason in [
            (body + b" ", "k", 1_700_000_100, "does not match"),
            (body, "other", 1_700_000_100, "does not match"),
            (body, "k", 1_700_000_000 + 301, "tolerance"),     # a replay, later
    ]:
        with pytest.raises(BadSignature, match=reason):
            verify(wrong_body, headers, secret, now=now)
    with pytest.raises(BadSignature, match="no X-AgentGov-Signature"):
        verify(body, {}, "k")
    with pytest.raises(BadSignature, match="malformed"):
        verify(body, {"X-AgentGov-Signature": "v1=abc"}, "k")
