"""The client's address as the sign-in limit and the audit trail name it."""

import ipaddress

from django.conf import settings
from django.http import HttpRequest


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text.strip())
    except ValueError:
        return None


def _trusted(address: ipaddress.IPv4Address | ipaddress.IPv6Address | None) -> bool:
    return address is not None and any(address in net for net in settings.TRUSTED_PROXIES)


def client_address(request: HttpRequest) -> str:
    """REMOTE_ADDR; when that is a trusted proxy, the right-most X-Forwarded-For hop that is not.

    Hops left of the first untrusted one were written by the client and are never believed:
    otherwise one attacker could claim a fresh address for every guess."""
    remote = request.META.get("REMOTE_ADDR", "")
    if not _trusted(_address(remote)):
        return remote
    hops = [_address(hop) for hop in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")]
    for hop in reversed(hops):
        if hop is None:
            return remote  # a malformed hop: key on the proxy rather than guess
        if not _trusted(hop):
            return str(hop)
    return remote
