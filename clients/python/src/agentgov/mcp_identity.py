"""The one identity of an MCP server: what makes two spellings the same server.

Every judge that asks "is this the same server?" (the toxic-combination check on a proposal,
the fleet's observed-path check, the diff of observed against approved servers, the governed
MCP proxy matching its upstream to an approved entry) asks this module, so no judge can be
passed by a spelling another judge reads differently. Pure Python, no dependencies: the control
plane and the client share it.

An http(s) URL is reduced to what selects the server:
- scheme and host lowercased; the host in its IDNA (punycode) form, a trailing dot dropped;
- the default port dropped (443 for https, 80 for http); any other port kept;
- the path with dot segments removed, empty segments (doubled or trailing slashes) dropped,
  percent-escapes of unreserved characters decoded and every other escape in upper case,
  non-ASCII characters percent-encoded as UTF-8;
- user information, the query and the fragment dropped. A fragment never reaches the server;
  a query string does not make another server, and keeping it would let `?x` split one server
  into two and walk a toxic combination past the check. Two URLs that differ only there are
  one server to every judge.

A stdio command is its argv as the shell splits it (shlex), joined back with single spaces
and the shell's own quoting, so spacing and quoting style never make another server; the
words themselves (the program's path, each argument) are compared exactly.

Anything that cannot be read (a URL that is not http(s) with a host, an unclosed quote) raises
ValueError: a gate refuses what it cannot identify rather than guess.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, urlsplit

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


def server_identity(server: Mapping[str, Any]) -> str:
    """The identity of an MCP server entry (approved or observed): by its URL, else by its
    command; ValueError if it has neither or the one it has cannot be read."""
    if server.get("url") is not None:
        return url_identity(server["url"])
    if server.get("command") is not None:
        return command_identity(server["command"])
    raise ValueError("expected an MCP server with a url or a command")


def target_identity(target: str) -> str:
    """The identity of where a server is reached, given as one string: an http(s) URL, or
    else a stdio command line (how `agentctl mcp-proxy --upstream` takes it)."""
    if isinstance(target, str) and target.strip().lower().startswith(("http://", "https://")):
        return url_identity(target)
    return command_identity(target)


def same_server(left: Mapping[str, Any], right: Mapping[str, Any]) -> bool:
    """Whether two entries name one server; an entry that cannot be read matches nothing."""
    try:
        return server_identity(left) == server_identity(right)
    except ValueError:
        return False


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


def _unescape_unreserved(match: re.Match[str]) -> str:
    char = chr(int(match[1], 16))
    return char if char in UNRESERVED else f"%{match[1].upper()}"


def _path(path: str) -> str:
    """Dot segments resolved, empty segments dropped, escapes in one spelling; "" for the
    root (a trailing slash never makes another server)."""
    path = quote(_ESCAPE.sub(_unescape_unreserved, path), safe=_PATH_SAFE)
    out: list[str] = []
    for segment in path.split("/"):
        if segment == "..":
            if out:
                out.pop()
        elif segment not in ("", "."):
            out.append(segment)
    return "".join(f"/{segment}" for segment in out)
