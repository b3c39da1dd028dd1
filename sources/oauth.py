"""The OAuth permission source: the scopes an agent's token actually holds, read from the
authorisation server's token introspection (RFC 7662), and the token revoked (RFC 7009) when
it holds more than approved.

The control plane authenticates as a client (HTTP Basic, `client_id:client_secret` in the
source's connector secret) and reaches only allow-listed hosts (`CONNECTOR_ALLOWED_HOSTS`,
config/outbound.py). A token is all or nothing: a correction can take it away, never narrow it
or give more (a new token with the approved scopes is issued by the person it acts for), and a
token bound to more than one agent is never revoked by a correction."""

import base64
import json
import re
from typing import Any
from urllib.parse import urlencode

from django.conf import settings

from config import outbound
from config.permission_sources import Source
from reconciliation.connectors.base import ConnectorError, CorrectionRefused
from registry.connector_secrets import secret_value
from sources.postgres import Reading, SourceRefused, highest, rank

TIMEOUT_SECONDS = 5
# RFC 6749 3.3 separates scopes by spaces; ASCII blanks are never part of one, but every other
# character is (a scope holding a no-break space is one scope, compared exactly).
SCOPE_SEPARATOR = re.compile(r"[ \t\r\n]+")


def _post(source: Source, url: str, form: dict[str, str]) -> tuple[int, dict[str, Any]]:
    client = secret_value(source.secret) or ""
    if ":" not in client:
        raise SourceRefused(f"permission source {source.name} has no client credentials",
                            detail=f"connector secret {source.secret} is not client_id:secret")
    try:
        destination = outbound.check(url, settings.CONNECTOR_ALLOWED_HOSTS)
    except outbound.Refused as error:
        raise ConnectorError(f"permission source {source.name} unreachable",
                             detail=f"refused: {error}") from None
    body = urlencode(form).encode()
    headers = {"Authorization": "Basic " + base64.b64encode(client.encode()).decode(),
               "Content-Type": "application/x-www-form-urlencoded",
               "Accept": "application/json"}
    target = destination.path or "/"
    try:
        answer = outbound.send(destination, "POST", target, headers, body,
                               timeout=TIMEOUT_SECONDS,
                               max_bytes=settings.OUTBOUND_MAX_ANSWER_BYTES)
    except OSError as error:
        raise ConnectorError(f"permission source {source.name} unreachable",
                             detail=str(error)) from None
    if answer.status in (401, 403):
        raise SourceRefused(f"permission source {source.name} refused the control plane's "
                            f"client credentials ({answer.status}) at {url}")
    try:
        reply = json.loads(answer.body or b"{}")
    except ValueError:
        reply = None
    if answer.status >= 300 or not isinstance(reply, dict):
        raise ConnectorError(f"permission source {source.name} unreachable",
                             detail=f"POST {url} answered {answer.status}")
    return answer.status, reply


def _token(source: Source, agent: str) -> str:
    name = source.role_of(agent) or ""
    token = secret_value(name)
    if not token:
        raise SourceRefused(f"permission source {source.name}: the token of {agent} is not "
                            f"set", detail=f"connector secret {name} is empty")
    return token


def read(source: Source, agent: str) -> Reading:
    """The access the agent's token holds now (an inactive token: none)."""
    _, reply = _post(source, source.introspection_url,
                     {"token": _token(source, agent), "token_type_hint": "access_token"})
    scopes = (SCOPE_SEPARATOR.split(str(reply.get("scope") or "").strip(" \t\r\n"))
              if reply.get("active") is True else [])
    scopes = [scope for scope in scopes if scope]
    grants = []
    for scope in sorted(set(scopes)):
        if scope in source.scopes:
            resource, level = source.scopes[scope]
            grants.append({"resource": resource, "level": level, "via": "token scope",
                           "what": f"scope {scope}", "kind": "scope"})
    access = {resource: highest([g["level"] for g in grants if g["resource"] == resource])
              for resource in sorted(source.covers)}
    unmapped = sorted(set(scopes) - set(source.scopes))
    grants += [{"resource": None, "level": None, "via": "token scope",
                "what": f"scope {scope} (maps to no resource)", "kind": "scope"}
               for scope in unmapped]
    return Reading(source.role_of(agent) or "", access, grants)


def correct(source: Source, agent: str, resource: str, wanted: str | None
            ) -> tuple[list[str], Reading, Reading]:
    """Revoke the agent's token when it holds more than `wanted` on `resource`."""
    before = read(source, agent)
    held = before.access.get(resource)
    if rank(held) <= rank(wanted):
        if rank(held) < rank(wanted):
            raise CorrectionRefused(f"{source.name}: a token with more scopes is issued by the "
                                    f"person it acts for, not by a correction")
        return [], before, before
    name = source.role_of(agent) or ""
    sharing = source.sharing(name)
    if len(sharing) > 1:
        raise CorrectionRefused(f"the token in {name} is shared by agents "
                                f"{', '.join(sharing)}: revoking it would stop them all")
    try:
        _post(source, source.revocation_url,
              {"token": _token(source, agent), "token_type_hint": "access_token"})
    except SourceRefused as refused:
        raise CorrectionRefused(f"{refused}: the client may not revoke tokens") from None
    after = read(source, agent)
    if rank(after.access.get(resource)) > rank(wanted):
        raise CorrectionRefused(f"{source.name} answered the revocation but the token of "
                                f"{agent} is still active")
    return [f"revoke the token in {name} at {source.revocation_url} (RFC 7009)"], before, after
