"""Outbound destinations: the one guard every request the control plane sends goes through.

A destination is allowed when an allow-list entry names its host (a `*.corp.example` glob, an
IP or a CIDR) and its port (`:8443`, `:*`; none: the scheme's default port only), and every
address its name resolves to is public, or inside an IP/CIDR entry that names it explicitly.
The name is resolved once; the request then goes to that checked address (the Host header and
TLS SNI keep the name), so DNS cannot answer differently between check and connect. Redirects
are never followed. Pure Python, no Django.
"""

import fnmatch
import http.client
import ipaddress
import socket
import ssl
from dataclasses import dataclass
from urllib.parse import urlsplit

DEFAULT_PORTS = {"http": 80, "https": 443}
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


class Refused(ValueError):
    """The destination is not allowed (or cannot be resolved); nothing was sent."""


@dataclass(frozen=True)
class Entry:
    """One allow-list entry: a host glob or an address range, and a port (None: default)."""

    glob: str | None
    network: IPNetwork | None
    port: int | None
    any_port: bool

    def port_matches(self, scheme: str, port: int) -> bool:
        if self.any_port:
            return True
        return port == (self.port if self.port is not None else DEFAULT_PORTS[scheme])


@dataclass(frozen=True)
class Destination:
    """A checked destination: where to connect (address) and what to call it (host)."""

    scheme: str
    host: str
    port: int
    address: str
    path: str


def parse_entry(text: str) -> Entry:
    """`host[:port]`, `[v6]:port`, `10.0.0.0/8:443`, `*.corp.example:*`; ValueError if bad."""
    text = text.strip()
    port_text = ""
    if text.startswith("["):
        host, bracket, rest = text[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            raise ValueError(f"bad allow-list entry {text!r}")
        port_text = rest[1:]
    elif text.count(":") == 1:
        host, port_text = text.split(":")
    else:
        host = text
    if not host:
        raise ValueError(f"bad allow-list entry {text!r}: no host")
    any_port, port = port_text == "*", None
    if port_text and not any_port:
        if not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise ValueError(f"bad allow-list entry {text!r}: port must be 1-65535 or *")
        port = int(port_text)
    try:
        network = ipaddress.ip_network(host, strict=False)
    except ValueError:
        if any(ch.isspace() or ch in "/@" for ch in host):
            raise ValueError(f"bad allow-list entry {text!r}") from None
        return Entry(host.lower().rstrip("."), None, port, any_port)
    return Entry(None, network, port, any_port)


def parse_entries(patterns: list[str]) -> list[Entry]:
    return [parse_entry(p) for p in patterns if p.strip()]


def naming_entries(urls: list[str]) -> list[str]:
    """Allow-list entries naming each http(s) URL's own host and port (other URLs skipped):
    for destinations an operator configured, which still go through check() when sent."""
    entries = []
    for url in urls:
        try:
            scheme, host, port, _ = _split(url)
        except Refused:
            continue
        entries.append(f"[{host}]:{port}" if ":" in host else f"{host}:{port}")
    return entries


def _ip(text: str) -> IPAddress | None:
    try:
        address = ipaddress.ip_address(text.split("%")[0])
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        return address.ipv4_mapped  # ::ffff:127.0.0.1 is 127.0.0.1
    return address


def _split(url: str) -> tuple[str, str, int, str]:
    try:
        parts = urlsplit(url)
        host = (parts.hostname or "").lower().rstrip(".")
        port = parts.port
    except ValueError:
        raise Refused("not an http(s) URL with a host") from None
    if parts.scheme not in DEFAULT_PORTS or not host or parts.username or parts.password:
        raise Refused("not an http(s) URL with a host")
    path = parts.path or "/"
    return parts.scheme, host, port or DEFAULT_PORTS[parts.scheme], path


def _named(entries: list[Entry], scheme: str, host: str, port: int) -> bool:
    literal = _ip(host)
    for entry in entries:
        if not entry.port_matches(scheme, port):
            continue
        if entry.glob is not None and literal is None and fnmatch.fnmatchcase(host, entry.glob):
            return True
        if entry.network is not None and literal is not None and literal in entry.network:
            return True
    return False


def listed(url: str, patterns: list[str]) -> bool:
    """True when the URL is http(s) and the allow-list names its host and port (no DNS)."""
    try:
        scheme, host, port, _ = _split(url)
    except Refused:
        return False
    return _named(parse_entries(patterns), scheme, host, port)


def _address_allowed(address: IPAddress, entries: list[Entry], scheme: str, port: int) -> bool:
    if address.is_global and not address.is_multicast:
        return True
    # loopback, link-local (169.254.169.254), private, reserved, multicast: only when named
    return any(e.network is not None and address in e.network and e.port_matches(scheme, port)
               for e in entries)


def resolve(host: str, port: int) -> list[str]:
    """Every address the name resolves to now (tests replace this to play DNS)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def check(url: str, patterns: list[str]) -> Destination:
    """The destination to send to, resolved once and checked; Refused otherwise."""
    scheme, host, port, path = _split(url)
    entries = parse_entries(patterns)
    if not _named(entries, scheme, host, port):
        raise Refused(f"{host}:{port} is not in the allow-list")
    try:
        addresses = resolve(host, port)
    except (OSError, UnicodeError) as error:
        raise Refused(f"{host} does not resolve: {error}") from None
    checked = [_ip(a) for a in addresses]
    if not checked or any(a is None or not _address_allowed(a, entries, scheme, port)
                          for a in checked):
        raise Refused(f"{host} resolves to {', '.join(addresses) or 'nothing'}, an address "
                      "the allow-list does not name")
    return Destination(scheme, host, port, str(checked[0]), path)


class _PinnedHTTP(http.client.HTTPConnection):
    def __init__(self, destination: Destination, timeout: float) -> None:
        super().__init__(destination.host, destination.port, timeout=timeout)
        self.address = destination.address

    def connect(self) -> None:
        self.sock = socket.create_connection((self.address, self.port), self.timeout)


class _PinnedHTTPS(http.client.HTTPSConnection):
    def __init__(self, destination: Destination, timeout: float) -> None:
        super().__init__(destination.host, destination.port, timeout=timeout,
                         context=ssl.create_default_context())
        self.address = destination.address

    def connect(self) -> None:
        sock = socket.create_connection((self.address, self.port), self.timeout)
        # The certificate is checked against the name, though we connect to the address.
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes


class TooLarge(OSError):
    """The answer was longer than the caller accepts."""


def send(destination: Destination, method: str, target: str, headers: dict[str, str],
         body: bytes | None = None, *, timeout: float = 5,
         max_bytes: int = 1_048_576) -> Answer:
    """One request to the checked address; a 3xx is returned as is, never followed.
    Raises OSError (including TooLarge) when the platform cannot be reached or read."""
    kind = _PinnedHTTPS if destination.scheme == "https" else _PinnedHTTP
    connection = kind(destination, timeout)
    try:
        connection.request(method, target, body=body, headers=headers)
        response = connection.getresponse()
        data = response.read(max_bytes + 1)
        if len(data) > max_bytes:
            raise TooLarge(f"answer over {max_bytes} bytes")
        return Answer(response.status, data)
    except OSError:
        raise  # including ssl.SSLCertVerificationError, which is also a ValueError
    except (http.client.HTTPException, ValueError) as error:  # ValueError: unsendable target
        raise OSError(f"bad HTTP exchange: {error!r}") from None
    finally:
        connection.close()
