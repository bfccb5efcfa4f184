"""A small Kubernetes API server over HTTP, serving recorded responses, so lightkube's real client code runs.

It answers list requests from the recorded ``*List`` documents and watch requests from a recorded event stream,
applying each event to what later lists return. A watch from a resourceVersion older than the oldest it can
replay answers an ``ERROR`` event with status 410 (Gone), as the API server does when etcd compacted history.
Unknown paths answer 404 (Kueue not installed, when its documents are not given). A Node can be read alone
(``GET /api/v1/nodes/{name}``) and changed by a JSON merge patch (``PATCH``, recorded in ``patches``); a patch naming
a ``metadata.resourceVersion`` other than the node's answers 409 Conflict, as the API server does.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

FIXTURES = Path(__file__).parent / "fixtures" / "kubernetes"

ROUTES = {
    "/api/v1/pods": "pods",
    "/api/v1/nodes": "nodes",
    "/apis/kueue.x-k8s.io/v1beta1/workloads": "workloads",
    "/apis/kueue.x-k8s.io/v1beta1/clusterqueues": "clusterqueues",
    "/apis/kueue.x-k8s.io/v1beta1/localqueues": "localqueues",
    "/apis/kueue.x-k8s.io/v1beta1/resourceflavors": "resourceflavors",
}


class FakeKube:
    def __init__(self, kueue: bool = True) -> None:
        names = [n for n in ROUTES.values() if kueue or n in ("pods", "nodes")]
        self.lists: dict[str, dict[str, Any]] = {n: json.loads((FIXTURES / f"{n}.json").read_text()) for n in names}
        self.events: dict[str, list[dict[str, Any]]] = {"pods": []}
        self.pending_events: dict[str, list[dict[str, Any]]] = {
            "pods": [json.loads(line) for line in (FIXTURES / "pods-watch.jsonl").read_text().splitlines()]
        }
        self.expire_after_events = False  # answer 410 to the next watch once the recorded events were sent
        self.requests: list[str] = []
        self.patches: list[tuple[str, str, dict[str, Any]]] = []  # (path, content type, body) of each PATCH
        self.lock = threading.Lock()

    def node(self, name: str) -> dict[str, Any] | None:
        return next((n for n in self.lists["nodes"]["items"] if n["metadata"]["name"] == name), None)

    def patch_node(self, name: str, patch: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """Apply a merge patch (RFC 7386) to a node: (status, the node or a Status)."""
        with self.lock:
            node = self.node(name)
            if node is None:
                return 404, {"kind": "Status", "status": "Failure", "reason": "NotFound", "code": 404}
            version = (patch.get("metadata") or {}).get("resourceVersion")
            if version is not None and version != node["metadata"]["resourceVersion"]:
                message = "the object has been modified; please apply your changes to the latest version"
                return 409, {
                    "kind": "Status",
                    "status": "Failure",
                    "reason": "Conflict",
                    "message": message,
                    "code": 409,
                }
            merged = _merge(node, patch)
            merged["metadata"]["resourceVersion"] = str(int(node["metadata"]["resourceVersion"]) + 1)
            items = self.lists["nodes"]["items"]
            items[items.index(node)] = merged
            return 200, merged

    def apply(self, name: str, event: dict[str, Any]) -> None:
        items = self.lists[name]["items"]
        uid = event["object"]["metadata"]["uid"]
        items[:] = [i for i in items if i["metadata"]["uid"] != uid]
        if event["type"] != "DELETED":
            items.append(event["object"])
        self.lists[name]["metadata"]["resourceVersion"] = event["object"]["metadata"]["resourceVersion"]

    def list_body(self, name: str) -> bytes:
        with self.lock:
            return json.dumps(self.lists[name]).encode()

    def watch_events(self, name: str, since: str) -> list[dict[str, Any]] | None:
        """Events to send from ``since`` (None: that version is gone)."""
        with self.lock:
            pending = self.pending_events.get(name, [])
            if pending:
                sent = list(pending)
                pending.clear()
                for event in sent:
                    self.apply(name, event)
                return sent
            if self.expire_after_events and name == "pods":
                self.expire_after_events = False
                return None
            return []


def _merge(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge key by key, null removes a key, anything else (lists too) replaces."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _merge(result.get(key), value)
    return result


def _handler(kube: FakeKube) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_PATCH(self) -> None:
            url = urlsplit(self.path)
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
            kube.patches.append((url.path, self.headers.get("Content-Type", ""), body))
            if not url.path.startswith("/api/v1/nodes/"):
                self._send(404, json.dumps({"kind": "Status", "code": 404}).encode())
                return
            status, answer = kube.patch_node(url.path.rsplit("/", 1)[1], body)
            self._send(status, json.dumps(answer).encode())

        def do_GET(self) -> None:
            url = urlsplit(self.path)
            query = parse_qs(url.query)
            if url.path.startswith("/api/v1/nodes/"):
                with kube.lock:
                    node = kube.node(url.path.rsplit("/", 1)[1])
                kube.requests.append(url.path)
                if node is None:
                    self._send(404, json.dumps({"kind": "Status", "reason": "NotFound", "code": 404}).encode())
                else:
                    self._send(200, json.dumps(node).encode())
                return
            name = ROUTES.get(url.path)
            kube.requests.append(f"{url.path}{'?watch' if query.get('watch') else ''}")
            if name is None or name not in kube.lists:
                status = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404}
                self._send(404, json.dumps(status).encode())
                return
            if query.get("watch") != ["true"]:
                self._send(200, kube.list_body(name))
                return
            events = kube.watch_events(name, (query.get("resourceVersion") or [""])[0])
            if events is None:
                gone = {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "status": "Failure",
                    "message": "too old resource version",
                    "reason": "Expired",
                    "code": 410,
                }
                events = [{"type": "ERROR", "object": gone}]
            else:
                time.sleep(0.0 if events else min(1.0, float((query.get("timeoutSeconds") or ["1"])[0])))
            body = b"".join(json.dumps(e).encode() + b"\n" for e in events)
            self._send(200, body)

    return Handler


@contextmanager
def fake_kube(kueue: bool = True) -> Iterator[tuple[FakeKube, str]]:
    kube = FakeKube(kueue=kueue)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(kube))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield kube, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
