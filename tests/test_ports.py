"""Servers in tests never race for a port (issue 10 #8), and a busy port fails at once with a clear message.

A test used to pick a free port, close it and start a server on it later; another process took the port in between
and CI failed with ``Errno 98``. Servers now bind port 0 and say which port they got, and a test that needs a fixed
port (a restart on the same address) holds it with :func:`tests.conftest.reserved_port` all along.
"""

from __future__ import annotations

import asyncio
import errno
import re
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from mfumon.api.errors import BindError
from mfumon.api.server import bind_socket
from tests.conftest import LiveServer, reserved_port, start_server

ROOT = Path(__file__).resolve().parents[1]


def _refused(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == errno.ECONNREFUSED


def test_serve_on_port_zero_says_which_port_it_got(tmp_path: Path) -> None:
    with start_server(tmp_path) as server:
        assert server.port > 0
        assert f"mfumon serve: listening on http://127.0.0.1:{server.port}" in server.log()
        assert httpx.get(f"{server.url}/healthz", timeout=10).json() == {"status": "ok"}


def test_serve_on_a_busy_port_fails_at_once(live_server: LiveServer, tmp_path: Path) -> None:
    workdir = tmp_path / "second"
    workdir.mkdir()
    result = subprocess.run(
        [sys.executable, "-m", "mfumon", "serve", "--port", str(live_server.port)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=workdir,
    )
    assert result.returncode == 1
    assert f"cannot listen on 127.0.0.1:{live_server.port}: Address already in use" in result.stderr
    assert not (workdir / "mfumon.db").exists()  # it gave up before touching a database


def test_a_reserved_port_is_refused_held_and_can_be_served_again(tmp_path: Path) -> None:
    with reserved_port() as port:
        assert _refused(port)
        with socket.socket() as other, pytest.raises(OSError) as taken:
            other.bind(("127.0.0.1", port))  # nobody else gets it while we hold it
        assert taken.value.errno == errno.EADDRINUSE
        for _ in range(2):  # start, stop, start again on the same address
            with start_server(tmp_path, port=port) as server:
                assert server.port == port
                assert httpx.get(f"{server.url}/healthz", timeout=10).status_code == 200
            assert _refused(port)


def test_no_server_starts_on_a_port_picked_in_advance() -> None:
    """The racy idiom (bind port 0, close, hand the number to a server started later) is gone from tests and bench."""
    racy = re.compile(r"def free_port\b|free_port\(\)|getsockname\(\)\[1\]")
    offenders = [
        f"{path.relative_to(ROOT)}:{number}"
        for folder in ("tests", "bench")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if path.name != "conftest.py" or path.parent.name != "tests"
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if racy.search(line) and path != Path(__file__)
    ]
    assert not offenders, offenders


@pytest.mark.parametrize("host", ["127.0.0.1", "::1"])
def test_connections_to_the_bound_socket_send_without_nagle(host: str) -> None:
    """asyncio turns Nagle's algorithm off only on sockets that say TCP; with it on, every response written as head
    then body waited for the client's delayed ACK (~40 ms a request). The accepted connection must have it off."""
    if host == "::1" and not socket.has_ipv6:
        pytest.skip("no IPv6")
    try:
        listener = bind_socket(host, 0)
    except BindError:
        pytest.skip(f"cannot listen on {host}")
    nodelay: list[int] = []

    class Probe(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            sock = transport.get_extra_info("socket")
            nodelay.append(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            transport.close()

    async def accept_one() -> None:
        server = await asyncio.get_running_loop().create_server(Probe, sock=listener)
        _, writer = await asyncio.open_connection(*listener.getsockname()[:2])
        for _ in range(500):
            if nodelay:
                break
            await asyncio.sleep(0.01)
        writer.close()
        server.close()
        await server.wait_closed()

    asyncio.run(accept_one())
    assert nodelay == [1]
