"""Servers as ``mfumon serve`` wires them, in this process, for the tests of its door (issue 54)."""

from __future__ import annotations

import json
import re
import socket
from dataclasses import dataclass
from typing import Any

from tests.utils.factories import node_sample

TOKENS = """\
exporter-secret  name=exporters scopes=nodes
other-secret     name=others    scopes=nodes
team-a-jobs      name=team-a    scopes=jobs  teams=a
reader-secret    name=reader    scopes=read
"""


@dataclass
class Served:
    port: int
    app: Any

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def connect(self) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.port), timeout=10)


def push_raw(node: str, body: bytes, token: str = "exporter-secret", extra: str = "") -> tuple[bytes, bytes]:
    """A push's head and body."""
    head = (
        f"POST /v1/nodes/{node}/samples HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
        f"authorization: Bearer {token}\r\n{extra}content-length: {len(body)}\r\n\r\n"
    )
    return head.encode(), body


def push_body(n: int = 1) -> bytes:
    return json.dumps(node_sample(n)).encode()


def read_answer(sock: socket.socket, method: str = "POST") -> tuple[bytes, bool]:
    """One whole answer (its Content-Length of body; none after a HEAD), and whether the server then closed."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"closed before a whole head: {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    found = re.search(rb"\r\ncontent-length: (\d+)", head, re.IGNORECASE)
    length = 0 if method == "HEAD" or found is None else int(found.group(1))
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk, f"closed before a whole body: {data!r}"
        body += chunk
    assert len(body) == length, f"more than the answer came: {body!r}"
    sock.settimeout(0.5)
    try:
        closed = sock.recv(65536) == b""
    except TimeoutError:
        closed = False
    except ConnectionResetError:
        closed = True
    finally:
        sock.settimeout(10)
    return head + b"\r\n\r\n" + body, closed
