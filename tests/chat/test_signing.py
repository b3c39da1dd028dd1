"""Slack's v0 request signing as a plain function, against Slack's documented example."""

import pytest

from chat.signing import BadSignature, sign, verify

# The example in Slack's "Verifying requests from Slack" guide.
SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
TIMESTAMP = "1531420618"
BODY = (b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&"
        b"channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&"
        b"command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2F"
        b"commands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&"
        b"trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c")
EXPECTED = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"


def test_slacks_own_example_signs_and_verifies():
    assert sign(SECRET, TIMESTAMP, BODY) == EXPECTED
    verify(SECRET, TIMESTAMP, BODY, EXPECTED, now=int(TIMESTAMP) + 299, max_age=300)


@pytest.mark.parametrize(("secret", "timestamp", "body", "signature", "now"), [
    (SECRET, TIMESTAMP, BODY, EXPECTED, int(TIMESTAMP) + 301),  # too old
    (SECRET, TIMESTAMP, BODY, EXPECTED, int(TIMESTAMP) - 301),  # from the future
    (SECRET, TIMESTAMP, BODY + b"&x=1", EXPECTED, int(TIMESTAMP)),  # body changed
    (SECRET, "1531420619", BODY, EXPECTED, int(TIMESTAMP)),  # timestamp changed
    ("another-secret-of-the-same-size", TIMESTAMP, BODY, EXPECTED, int(TIMESTAMP)),
    ("", TIMESTAMP, BODY, EXPECTED, int(TIMESTAMP)),  # no secret set: nothing is accepted
    (SECRET, None, BODY, EXPECTED, int(TIMESTAMP)),
    (SECRET, "-1", BODY, EXPECTED, int(TIMESTAMP)),
    (SECRET, TIMESTAMP, BODY, None, int(TIMESTAMP)),
    (SECRET, TIMESTAMP, BODY, EXPECTED.upper(), int(TIMESTAMP)),
])
def test_anything_else_is_refused(secret, timestamp, body, signature, now):
    with pytest.raises(BadSignature):
        verify(secret, timestamp, body, signature, now=now, max_age=300)
