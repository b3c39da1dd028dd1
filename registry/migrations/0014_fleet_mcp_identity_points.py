"""Meeting points keyed by each MCP server's one identity (agentgov.mcp_identity) instead of
its spelling, so an agent approved before the identity existed meets a proposal that spells
its server another way. Only the agents whose points change are rewritten.

The identity is agentgov.mcp_identity's as it was when this was written, copied here (that
module may change; what this migration did must not), as is the rest of what approval
recorded then."""

import hashlib
import re
import shlex
from urllib.parse import quote, urlsplit

from django.db import migrations

DEFAULT_PORTS = {"http": 80, "https": 443}
UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
# what may stay literal in a path (RFC 3986 pchar and "/"); "%" keeps the escapes as they are
_PATH_SAFE = "/%!$&'()*+,;=:@-._~"
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")


def url_identity(url: str) -> str:
    """`scheme://host[:port]/path` of an http(s) URL; ValueError if it is not one."""
    if not isinstance(url, str):
        raise ValueError(f"expected an http or https URL; got {type(url).__name__}")
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    port = parts.port  # ValueError on a port that is not a number in range
    if scheme not in DEFAULT_PORTS or not parts.hostname:
        raise ValueError(f"expected an http or https URL with a host; got {url!r}")
    host = _host(parts.hostname)
    netloc = f"[{host}]" if ":" in host else host
    if port is not None and port != DEFAULT_PORTS[scheme]:
        netloc = f"{netloc}:{port}"
    return f"{scheme}://{netloc}{_path(parts.path)}"


def command_identity(command: str) -> str:
    """A stdio command line as its argv, re-joined in one spelling; ValueError if the shell
    could not split it or it names no program."""
    if not isinstance(command, str):
        raise ValueError(f"expected a command line; got {type(command).__name__}")
    argv = shlex.split(command)  # ValueError on an unclosed quote
    if not argv:
        raise ValueError("expected a command line naming a program; got only blanks")
    return shlex.join(argv)


def server_identity(server: dict) -> str:
    """The identity of an MCP server entry (approved or observed): by its URL, else by its
    command; ValueError if it has neither or the one it has cannot be read."""
    if server.get("url") is not None:
        return url_identity(server["url"])
    if server.get("command") is not None:
        return command_identity(server["command"])
    raise ValueError("expected an MCP server with a url or a command")


def _host(hostname: str) -> str:
    host = hostname.lower().rstrip(".")
    if not host:
        raise ValueError("expected a host name")
    if ":" in host or host.isascii():
        return host  # an IPv6 literal, or already ASCII (punycode labels stay as written)
    try:
        return host.encode("idna").decode("ascii")
    except UnicodeError as error:
        raise ValueError(f"expected a host name IDNA can encode; got {hostname!r}") from error


def _unescape_unreserved(match: re.Match) -> str:
    char = chr(int(match[1], 16))
    return char if char in UNRESERVED else f"%{match[1].upper()}"


def _path(path: str) -> str:
    """Dot segments resolved, empty segments dropped, escapes in one spelling; "" for the
    root (a trailing slash never makes another server)."""
    path = quote(_ESCAPE.sub(_unescape_unreserved, path), safe=_PATH_SAFE)
    out: list = []
    for segment in path.split("/"):
        if segment == "..":
            if out:
                out.pop()
        elif segment not in ("", "."):
            out.append(segment)
    return "".join(f"/{segment}" for segment in out)


def _points(name, spec):
    points = {name, *(callee for callee in spec.get("delegates_to") or []
                      if isinstance(callee, str))}
    for server in spec.get("mcp_servers") or []:
        if not isinstance(server, dict):
            continue
        try:
            where = server_identity(server)
        except ValueError:
            where = server.get("url") or server.get("command") or server.get("name")
            where = where.strip() if isinstance(where, str) else ""
        if where:
            points.add("mcp:" + hashlib.sha256(where.encode()).hexdigest())
    return points


def rekey(apps, schema_editor):
    Agent = apps.get_model("registry", "Agent")
    MeetingPoint = apps.get_model("registry", "MeetingPoint")
    rows = Agent.objects.filter(active_version__isnull=False).values_list(
        "pk", "name", "active_version__spec")
    for pk, name, spec in rows.iterator(chunk_size=2000):
        if not isinstance(spec, dict) or not spec.get("mcp_servers"):
            continue  # no server, nothing keyed by one
        wanted = _points(name, spec)
        have = set(MeetingPoint.objects.filter(agent_id=pk).values_list("point", flat=True))
        if wanted != have:
            MeetingPoint.objects.filter(agent_id=pk).delete()
            MeetingPoint.objects.bulk_create([MeetingPoint(agent_id=pk, point=p)
                                              for p in sorted(wanted)])


class Migration(migrations.Migration):

    dependencies = [
        ("registry", "0001_squashed_0013_meeting_points"),
    ]

    operations = [migrations.RunPython(rekey, migrations.RunPython.noop)]
