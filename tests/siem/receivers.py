"""Real local SIEM receivers for the stream tests: a syslog server over TLS (RFC 5425,
octet-counted frames), an OTLP/HTTP logs receiver and a Splunk HEC-style HTTP receiver. Each
keeps every record it was sent, in arrival order, and can be stopped and started again on the
same port (an outage). Delivery is at least once: `unique()` drops a (stream, seq) seen
before, as a SIEM's side would."""

import json
import socket
import socketserver
import ssl
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from config import embedded_redis

BOM = b"\xef\xbb\xbf"


class Receiver:
    """What every receiver keeps: the records, raw and deduplicated, and each request's seqs."""

    def __init__(self) -> None:
        self.port = embedded_redis.free_port()
        self.lock = threading.Lock()
        self.records: list[dict[str, Any]] = []
        self.requests: list[list[tuple[str, int]]] = []
        self.hold_request: int | None = None  # 1-based: the request to hold unanswered
        self.held = threading.Event()
        self.release = threading.Event()
        self.server: socketserver.BaseServer | None = None

    def keep(self, records: list[dict[str, Any]]) -> None:
        with self.lock:
            self.records += records
            self.requests.append([(r["stream"], r["seq"]) for r in records])
            number = len(self.requests)
        if number == self.hold_request:
            self.held.set()
            self.release.wait(60)

    def seqs(self, stream: str) -> list[int]:
        """Every seq of a stream in arrival order, duplicates included."""
        with self.lock:
            return [r["seq"] for r in self.records if r["stream"] == stream]

    def unique(self, stream: str) -> dict[int, dict[str, Any]]:
        """Each seq once (the first arrival), as the SIEM's side keeps them."""
        kept: dict[int, dict[str, Any]] = {}
        with self.lock:
            for record in self.records:
                if record["stream"] == stream:
                    kept.setdefault(record["seq"], record)
        return kept

    def _serve(self, server: socketserver.BaseServer) -> None:
        self.server = server
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                         daemon=True).start()

    def stop(self) -> None:
        """An outage: the port stops answering (connections are refused)."""
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None


class _ReusingHTTPServer(ThreadingHTTPServer):
    allow_reuse_address = True
    daemon_threads = True


class HTTPReceiver(Receiver):
    """An HTTP collector: `parse` turns a request body into records; answers 200."""

    def __init__(self, path: str, parse: Callable[[bytes], list[dict[str, Any]]],
                 token: str = "") -> None:
        super().__init__()
        self.path, self.parse, self.token = path, parse, token
        self.headers: list[dict[str, str]] = []

    def start(self) -> "HTTPReceiver":
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                receiver.headers.append(dict(self.headers))
                if self.path != receiver.path or (receiver.token and self.headers.get(
                        "Authorization") != f"Splunk {receiver.token}"):
                    self.send_response(403)
                    self.end_headers()
                    return
                receiver.keep(receiver.parse(body))
                answer = b'{"text":"Success","code":0}'
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

        self._serve(_ReusingHTTPServer(("127.0.0.1", self.port), Handler))
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.path}"


def parse_hec(body: bytes) -> list[dict[str, Any]]:
    """Splunk HEC batches: JSON objects one after another; the record is each one's event."""
    decoder, text, at, events = json.JSONDecoder(), body.decode(), 0, []
    while at < len(text):
        while at < len(text) and text[at].isspace():
            at += 1
        if at >= len(text):
            break
        event, at = decoder.raw_decode(text, at)
        assert event["source"] == "agentgov" and event["sourcetype"].startswith("agentgov:")
        events.append(event["event"])
    return events


def parse_otlp(body: bytes) -> list[dict[str, Any]]:
    """An OTLP/JSON ExportLogsServiceRequest: each log record's body is the record; its
    attributes carry the same seq and hash."""
    request, records = json.loads(body), []
    for resource in request["resourceLogs"]:
        for scope in resource["scopeLogs"]:
            for log in scope["logRecords"]:
                record = json.loads(log["body"]["stringValue"])
                attributes = {a["key"]: a["value"] for a in log["attributes"]}
                assert attributes["agentgov.seq"] == {"intValue": str(record["seq"])}
                assert attributes["agentgov.hash"] == {"stringValue": record["hash"]}
                assert int(log["timeUnixNano"]) > 0
                records.append(record)
    return records


class SyslogTLSReceiver(Receiver):
    """A syslog server over TLS: octet-counted RFC 5424 messages, read to the end of the
    session, then closed cleanly (close_notify), as RFC 5425 asks."""

    def __init__(self, cert: Path, key: Path) -> None:
        super().__init__()
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(cert, key)
        self.messages: list[bytes] = []

    def start(self) -> "SyslogTLSReceiver":
        receiver = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                tls = receiver.context.wrap_socket(self.request, server_side=True)
                data = b""
                while chunk := tls.recv(65536):
                    data += chunk
                records = []
                for message in frames(data):
                    receiver.messages.append(message)
                    records.append(json.loads(message[message.index(BOM) + len(BOM):]))
                receiver.keep(records)
                tls.unwrap().close()

        class Server(socketserver.ThreadingTCPServer):
            allow_reuse_address = True
            daemon_threads = True

        self._serve(Server(("127.0.0.1", self.port), Handler))
        return self


def frames(data: bytes) -> list[bytes]:
    """Split octet-counted framing (RFC 6587 §3.4.1): LEN SP MSG, again and again."""
    messages, at = [], 0
    while at < len(data):
        space = data.index(b" ", at)
        length = int(data[at:space])
        messages.append(data[space + 1:space + 1 + length])
        at = space + 1 + length
        assert len(messages[-1]) == length, "a frame was cut short"
    return messages


def port_refuses(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), 0.5).close()
    except OSError:
        return True
    return False
