"""The ports the embedded Redis, the launcher and the tests' servers listen on: free when
picked and outside the kernel's ephemeral range, where any outgoing connection may take a
port between the pick and the server's bind (a CI run lost its nginx port that way)."""

import socket

import pytest

from config import embedded_redis


@pytest.fixture
def ephemeral_range(tmp_path, monkeypatch):
    """Point free_port() at a stand-in of /proc's ephemeral range holding `text`."""
    def write(text: str) -> None:
        path = tmp_path / "ip_local_port_range"
        path.write_text(text)
        monkeypatch.setattr(embedded_redis, "EPHEMERAL_RANGE", path)
    return write


def listen_on(port: int) -> socket.socket:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", port))
    server.listen()
    return server


def test_a_picked_port_is_below_the_ephemeral_range_and_free(ephemeral_range):
    ephemeral_range("32768\t60999\n")
    ports = {embedded_redis.free_port() for _ in range(20)}
    assert all(embedded_redis.LISTEN_PORTS_FROM <= port < 32768 for port in ports)
    assert len(ports) > 1, "every pick chose the same port: two test workers would collide"
    for port in ports:
        listen_on(port).close()


def test_a_port_somebody_listens_on_is_not_picked(ephemeral_range, monkeypatch):
    taken = listen_on(0)
    busy = taken.getsockname()[1]
    ephemeral_range(f"{busy + 1} 60999")
    monkeypatch.setattr(embedded_redis, "LISTEN_PORTS_FROM", busy - 999)
    draws, randbelow = [], embedded_redis.secrets.randbelow

    def busy_twice(room: int) -> int:
        draws.append(room)
        return 999 if len(draws) <= 2 else randbelow(room - 1)

    monkeypatch.setattr(embedded_redis.secrets, "randbelow", busy_twice)
    try:
        port = embedded_redis.free_port()
    finally:
        taken.close()
    assert busy - 999 <= port < busy and len(draws) >= 3


@pytest.mark.parametrize("text", ["1024 65535", "not a range", ""])
def test_without_room_below_the_range_the_kernel_picks(ephemeral_range, text):
    ephemeral_range(text)
    port = embedded_redis.free_port()
    listen_on(port).close()
