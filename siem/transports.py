"""Sending one batch to one sink. Every destination goes through the outbound allow-list
(config/outbound.py: SIEM_ALLOWED_HOSTS). A batch counts as delivered only when the receiver
said so: a 2xx answer over HTTP; for syslog, which has no answer, the receiver closing the TLS
session cleanly after reading ours to its end (RFC 5425 §4.4). A receiver that dies mid-batch
resets or drops the connection instead, and the batch is sent again."""

import socket
import ssl
from urllib.parse import urlsplit

from django.conf import settings

from config import outbound
from siem.choices import SinkKind

SYSLOG_SCHEME = "syslog+tls"
SYSLOG_DEFAULT_PORT = 6514  # RFC 5425


class DeliveryFailed(OSError):
    """The sink did not take the batch (it may have read part of it: it is sent again)."""


def split_syslog_url(url: str) -> tuple[str, int]:
    """host and port of a syslog+tls://host[:port] URL; ValueError otherwise."""
    parts = urlsplit(url)
    if parts.scheme != SYSLOG_SCHEME or not parts.hostname or parts.path not in ("", "/"):
        raise ValueError(f"a syslog sink's URL is {SYSLOG_SCHEME}://host[:port]")
    return parts.hostname, parts.port or SYSLOG_DEFAULT_PORT


def check_url(kind: str, url: str) -> None:
    """ValueError when the URL does not fit the kind (the allow-list is checked when sending)."""
    if kind == SinkKind.SYSLOG:
        split_syslog_url(url)
        return
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("an OTLP or HTTP sink's URL is http(s)://host[:port]/path")


def _tls_context(ca_pem: str) -> ssl.SSLContext:
    context = ssl.create_default_context(cadata=ca_pem or None)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


def send_syslog(url: str, ca_pem: str, body: bytes) -> None:
    host, port = split_syslog_url(url)
    try:
        destination = outbound.check(f"https://{host}:{port}/", settings.SIEM_ALLOWED_HOSTS)
    except outbound.Refused as error:
        raise DeliveryFailed(str(error)) from None
    timeout = settings.SIEM_TIMEOUT_SECONDS
    try:
        with socket.create_connection((destination.address, port), timeout) as raw:
            tls = _tls_context(ca_pem).wrap_socket(raw, server_hostname=host)
            tls.sendall(body)
            _close_after_receiver(tls)
    except (OSError, ssl.SSLError) as error:
        raise DeliveryFailed(f"syslog {host}:{port}: {error}") from None


def _close_after_receiver(tls: ssl.SSLSocket) -> None:
    """Our close_notify, then wait for the receiver to close: its close_notify, or its end of
    the connection (FIN), which it sends only once it has read ours. A receiver that died with
    our bytes unread resets the connection instead (an OSError: not delivered)."""
    try:
        plain = tls.unwrap()
    except ssl.SSLEOFError:
        return
    if plain.recv(1):
        raise DeliveryFailed("the syslog receiver sent data after closing")


def send_http(url: str, body: bytes, headers: dict[str, str]) -> None:
    try:
        destination = outbound.check(url, settings.SIEM_ALLOWED_HOSTS)
    except outbound.Refused as error:
        raise DeliveryFailed(str(error)) from None
    parts = urlsplit(url)
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    try:
        answer = outbound.send(destination, "POST", target, headers, body,
                               timeout=settings.SIEM_TIMEOUT_SECONDS, max_bytes=65536)
    except OSError as error:
        raise DeliveryFailed(f"{destination.host}:{destination.port}: {error}") from None
    if not 200 <= answer.status < 300:
        raise DeliveryFailed(f"{destination.host}:{destination.port} answered {answer.status}: "
                             f"{answer.body[:200].decode(errors='replace')}")
