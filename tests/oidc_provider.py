"""A small OpenID Connect provider the single sign-on tests start on 127.0.0.1: discovery,
JWKS, an authorize endpoint that approves whoever `provider.person` is (with their groups) and
redirects only to the registered callback, a token endpoint, and userinfo. Tests can make it
misbehave (sign with another key, issue expired tokens, name another audience). As an OAuth
authorisation server it also issues access tokens with scopes (`issue`), answers token
introspection (RFC 7662) and revokes tokens (RFC 7009) for a client that authenticates; a
client may be refused revocation (`revoke_allowed`)."""

import json
import secrets
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlparse

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

CLIENT_ID = "agentgov-console"
CLIENT_SECRET = "provider-issued-secret-7f3a9c2e41b8d6"


@dataclass
class Person:
    """Who the provider says is signing in."""

    sub: str
    preferred_username: str
    email: str
    groups: list[str] = field(default_factory=list)


def _new_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


class LocalProvider:
    """The provider, its signing key, and the knobs tests turn."""

    def __init__(self, redirect_uris: list[str]) -> None:
        self.redirect_uris = redirect_uris
        self.key = _new_key()
        self.kid = "test-key-1"
        self.person: Person | None = None
        self.sign_with_other_key = False
        self.algorithm = "RS256"  # "none" or "HS256" (with the client secret): forged tokens
        self.lifetime_seconds = 300
        self.audience = CLIENT_ID
        self.nonce: str | None = None  # set: every id token carries this nonce instead
        self.codes: dict[str, dict[str, Any]] = {}
        self.tokens: dict[str, Person] = {}
        self.scopes: dict[str, str] = {}  # access token -> its space-separated scopes
        self.revoked: set[str] = set()
        self.revoke_allowed = True
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.issuer = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> "LocalProvider":
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

    def settings(self) -> dict[str, Any]:
        """Django settings that point the control plane at this provider."""
        return {"OIDC_RP_CLIENT_ID": CLIENT_ID, "OIDC_RP_CLIENT_SECRET": CLIENT_SECRET,
                "OIDC_ISSUER": self.issuer, "OIDC_PROVIDER_NAME": "Example SSO"}

    def discovery(self) -> dict[str, Any]:
        return {"issuer": self.issuer, "authorization_endpoint": f"{self.issuer}/authorize",
                "token_endpoint": f"{self.issuer}/token",
                "userinfo_endpoint": f"{self.issuer}/userinfo",
                "jwks_uri": f"{self.issuer}/jwks", "response_types_supported": ["code"],
                "subject_types_supported": ["public"],
                "id_token_signing_alg_values_supported": ["RS256"]}

    def jwks(self) -> dict[str, Any]:
        public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        return {"keys": [{**public, "kid": self.kid, "alg": "RS256", "use": "sig"}]}

    def authorize(self, query: dict[str, str]) -> tuple[int, str]:
        """(status, Location or error) for an authorization request."""
        if query.get("client_id") != CLIENT_ID or query.get("redirect_uri") not in \
                self.redirect_uris:
            return 400, "unknown client or unregistered redirect_uri"
        if self.person is None:
            answer = urlencode({"error": "access_denied", "state": query.get("state", "")})
            return 302, f"{query['redirect_uri']}?{answer}"
        code = secrets.token_urlsafe(16)
        self.codes[code] = {"person": self.person, "nonce": query.get("nonce"),
                            "redirect_uri": query["redirect_uri"],
                            "challenge": query.get("code_challenge")}
        answer = urlencode({"code": code, "state": query.get("state", "")})
        return 302, f"{query['redirect_uri']}?{answer}"

    def token(self, form: dict[str, str]) -> tuple[int, dict[str, Any]]:
        grant = self.codes.pop(form.get("code", ""), None)
        if form.get("client_id") != CLIENT_ID or form.get("client_secret") != CLIENT_SECRET:
            return 401, {"error": "invalid_client"}
        if grant is None or grant["redirect_uri"] != form.get("redirect_uri"):
            return 400, {"error": "invalid_grant"}
        if grant["challenge"]:
            from mozilla_django_oidc.utils import generate_code_challenge

            if generate_code_challenge(form.get("code_verifier", ""), "S256") != \
                    grant["challenge"]:
                return 400, {"error": "invalid_grant"}
        person: Person = grant["person"]
        now = int(time.time())
        claims = {"iss": self.issuer, "sub": person.sub, "aud": self.audience, "iat": now,
                  "exp": now + self.lifetime_seconds, "nonce": self.nonce or grant["nonce"],
                  "preferred_username": person.preferred_username, "email": person.email,
                  "groups": person.groups}
        key: Any = _new_key() if self.sign_with_other_key else self.key
        if self.algorithm != "RS256":
            key = CLIENT_SECRET if self.algorithm == "HS256" else None
        id_token = jwt.encode(claims, key, algorithm=self.algorithm, headers={"kid": self.kid})
        access_token = secrets.token_urlsafe(16)
        self.tokens[access_token] = person
        return 200, {"access_token": access_token, "token_type": "Bearer",
                     "id_token": id_token, "expires_in": 300}

    def userinfo(self, authorization: str) -> tuple[int, dict[str, Any]]:
        person = self.tokens.get(authorization.removeprefix("Bearer "))
        if person is None:
            return 401, {"error": "invalid_token"}
        return 200, {"sub": person.sub, "preferred_username": person.preferred_username,
                     "email": person.email, "groups": person.groups}


def _client_of(provider: LocalProvider, authorization: str) -> bool:
    """Whether HTTP Basic credentials are the registered client's."""
    import base64

    try:
        given = base64.b64decode(authorization.removeprefix("Basic ")).decode()
    except ValueError:
        return False
    return given == f"{CLIENT_ID}:{CLIENT_SECRET}"


def issue(provider: LocalProvider, scope: str) -> str:
    """An access token holding `scope`, as if a person had consented to it."""
    token = secrets.token_urlsafe(16) + "&=+/"  # characters a form must encode
    provider.scopes[token] = scope
    return token


def introspect(provider: LocalProvider, form: dict[str, str], authorization: str
               ) -> tuple[int, dict[str, Any]]:
    if not _client_of(provider, authorization):
        return 401, {"error": "invalid_client"}
    token = form.get("token", "")
    if token not in provider.scopes or token in provider.revoked:
        return 200, {"active": False}
    return 200, {"active": True, "scope": provider.scopes[token], "client_id": CLIENT_ID,
                 "token_type": "Bearer"}


def revoke(provider: LocalProvider, form: dict[str, str], authorization: str
           ) -> tuple[int, dict[str, Any]]:
    if not _client_of(provider, authorization) or not provider.revoke_allowed:
        return 401, {"error": "invalid_client"}
    provider.revoked.add(form.get("token", ""))
    return 200, {}


def _handler(provider: LocalProvider) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _json(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802
            url = urlparse(self.path)
            query = {k: v[0] for k, v in parse_qs(url.query).items()}
            if url.path == "/.well-known/openid-configuration":
                self._json(200, provider.discovery())
            elif url.path == "/jwks":
                self._json(200, provider.jwks())
            elif url.path == "/authorize":
                status, where = provider.authorize(query)
                if status != 302:
                    self._json(status, {"error": where})
                    return
                self.send_response(302)
                self.send_header("Location", where)
                self.send_header("Content-Length", "0")
                self.end_headers()
            elif url.path == "/userinfo":
                self._json(*provider.userinfo(self.headers.get("Authorization", "")))
            else:
                self._json(404, {"error": "not_found"})

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("Content-Length", "0"))
            form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
            path = urlparse(self.path).path
            authorization = self.headers.get("Authorization", "")
            if path == "/token":
                self._json(*provider.token(form))
            elif path == "/introspect":
                self._json(*introspect(provider, form, authorization))
            elif path == "/revoke":
                self._json(*revoke(provider, form, authorization))
            else:
                self._json(404, {"error": "not_found"})

    return Handler
