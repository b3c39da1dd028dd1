"""The shipped nginx configuration, as it is, in front of a production-mode web process: plain
HTTP is sent to HTTPS, a person signs in over TLS with secure cookies, the audit trail names the
client's address (not the proxy's), and live alerts arrive over wss through the proxy."""

import http.client
import ipaddress
import json
import re
import shutil
import ssl
import subprocess
import urllib.parse

import pytest
from cryptography import x509
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from django.db import connection, transaction
from websockets.sync import client as ws_client

from audit.models import AuditEntry
from config import embedded_redis
from reconciliation import alerts
from tests.certificates import self_signed
from tests.conftest import (
    PASSWORD,
    ROOT,
    deployed_settings,
    eventually,
    start_daphne,
    stop_daphne,
)

SITE = ROOT / "deploy" / "nginx" / "agentgov.conf"


@pytest.fixture
def proxied(transactional_db, tmp_path):
    """nginx (Debian's) with the shipped site file, in front of a daphne in production mode."""
    binary = shutil.which("nginx")
    assert binary, "nginx is missing: `make test` installs Debian's nginx-light package"
    cert, key = self_signed(tmp_path, "127.0.0.1",
                            x509.IPAddress(ipaddress.ip_address("127.0.0.1")))
    tls_port, http_port = embedded_redis.free_port(), embedded_redis.free_port()
    origin = f"https://127.0.0.1:{tls_port}"
    web = start_daphne(CSRF_TRUSTED_ORIGINS=origin, TRUSTED_PROXIES="127.0.0.1/32",
                       **deployed_settings(tmp_path))
    site = envsubst(
        SITE.read_text(), AGENTGOV_UPSTREAM=web.url.removeprefix("http://"),
        AGENTGOV_SERVER_NAME="127.0.0.1", AGENTGOV_LISTEN=f"127.0.0.1:{tls_port}",
        AGENTGOV_LISTEN_PORT=str(tls_port),
        AGENTGOV_HTTP_LISTEN=f"127.0.0.1:{http_port}", AGENTGOV_TLS_CERT=str(cert),
        AGENTGOV_TLS_KEY=str(key))
    (tmp_path / "agentgov.conf").write_text(site)
    (tmp_path / "nginx.conf").write_text(
        "user root;\nworker_processes 1;\n"
        f"pid {tmp_path}/nginx.pid;\nerror_log {tmp_path}/error.log;\n"
        "events { worker_connections 256; }\n"
        "http {\n"
        f"  access_log {tmp_path}/access.log;\n"
        + "".join(f"  {kind}_temp_path {tmp_path}/{kind};\n"
                  for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
        + f"  include {tmp_path}/agentgov.conf;\n}}\n")
    proxy = subprocess.Popen([binary, "-p", str(tmp_path), "-c", str(tmp_path / "nginx.conf"),
                              "-g", "daemon off;"], stderr=subprocess.PIPE)
    try:
        eventually(lambda: embedded_redis.port_answers("127.0.0.1", tls_port), timeout=60,
                   message="nginx did not start")
        context = ssl.create_default_context(cafile=str(cert))
        yield {"tls_port": tls_port, "http_port": http_port, "origin": origin,
               "context": context, "web": web.url}
    finally:
        proxy.terminate()
        proxy.wait(timeout=20)
        stop_daphne(web)


def envsubst(text: str, **values: str) -> str:
    """What `envsubst` with the documented variable list does: ${AGENTGOV_...} only, nginx's
    own $variables untouched; a value the file needs and nobody gave is an error."""
    return re.sub(r"\$\{(AGENTGOV_[A-Z_]+)\}", lambda m: values[m.group(1)], text)


def request(proxied, method: str, path: str, body: str = "", **headers: str):
    conn = http.client.HTTPSConnection("127.0.0.1", proxied["tls_port"],
                                       context=proxied["context"], timeout=30)
    conn.request(method, path, body=body, headers=headers)
    response = conn.getresponse()
    return response, response.read().decode()


def test_signing_in_through_the_proxy_over_tls(people, proxied):
    # A password hashed as deployed (PBKDF2, not the suite's fast hasher) signs in too.
    people.dana.password = PBKDF2PasswordHasher().encode(PASSWORD, PBKDF2PasswordHasher().salt())
    people.dana.save(update_fields=["password"])
    plain = http.client.HTTPConnection("127.0.0.1", proxied["http_port"], timeout=30)
    plain.request("GET", "/login/")
    redirect = plain.getresponse()
    assert redirect.status == 301
    assert redirect.getheader("Location") == f"{proxied['origin']}/login/"

    page, body = request(proxied, "GET", "/login/")
    assert page.status == 200
    assert "max-age=31536000" in page.getheader("Strict-Transport-Security")
    csrf_cookie = next(c for c in page.headers.get_all("Set-Cookie") if c.startswith("csrftoken"))
    assert "Secure" in csrf_cookie
    csrf = csrf_cookie.split(";")[0].split("=", 1)[1]
    form_token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', body).group(1)

    signed_in, _ = request(
        proxied, "POST", "/login/",
        urllib.parse.urlencode({"username": "dana", "password": PASSWORD,
                                "csrfmiddlewaretoken": form_token}),
        **{"Content-Type": "application/x-www-form-urlencoded", "Cookie": f"csrftoken={csrf}",
           "Origin": proxied["origin"], "Referer": f"{proxied['origin']}/login/",
           "X-Forwarded-For": "203.0.113.9"})
    assert signed_in.status == 302, signed_in.status
    session = next(c for c in signed_in.headers.get_all("Set-Cookie")
                   if c.startswith("sessionid"))
    assert "Secure" in session and "HttpOnly" in session
    entry = AuditEntry.objects.filter(action="user.signed_in").order_by("-pk").first()
    assert entry is not None and "203.0.113.9" in json.dumps(entry.after)
    assert "127.0.0.1" not in json.dumps(entry.after)  # the proxy is not the client

    cookie = session.split(";")[0]
    home, _ = request(proxied, "GET", "/", Cookie=cookie)
    assert home.status == 200

    socket_context = proxied["context"]
    with ws_client.connect(f"wss://127.0.0.1:{proxied['tls_port']}/ws/alerts?since=0",
                           origin=proxied["origin"], ssl=socket_context, proxy=None,
                           open_timeout=30, additional_headers={"Cookie": cookie}) as socket:
        def delivered() -> bool:
            with transaction.atomic():
                alerts.broadcast("drift.detected", {"agent": "refund-agent",
                                                    "severity": "high"})
            connection.close()
            try:
                return json.loads(socket.recv(timeout=5)).get("agent") == "refund-agent"
            except TimeoutError:
                return False

        eventually(delivered, timeout=60, message="no alert arrived over wss through nginx")


def test_a_probe_asks_a_web_process_directly_over_plain_http(proxied):
    """A load balancer (or the operator guide's wait) probes each web process, not the proxy:
    /readyz and /healthz answer over plain HTTP; every other page is still sent to HTTPS."""
    host, port = proxied["web"].removeprefix("http://").split(":")
    for path, status in (("/readyz", 200), ("/healthz", 200), ("/login/", 301),
                         ("/metrics", 301), ("/readyz/", 301)):
        direct = http.client.HTTPConnection(host, int(port), timeout=30)
        direct.request("GET", path, headers={"Host": "127.0.0.1"})
        response = direct.getresponse()
        assert (path, response.status) == (path, status)
        direct.close()
