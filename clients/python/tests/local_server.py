"""A tiny HTTP server that answers as each test scripts it: how a client meets a server that answers wrongly."""

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: str


class Answer:
    """What a scripted answer writes through: a JSON body, an event stream, or a dropped connection."""

    def __init__(self, handler: BaseHTTPRequestHandler) -> None:
        self._handler = handler

    def json(self, status: int, body: Any, headers: dict[str, str] | None = None, content_type: str | None = None) -> None:
        kind = content_type or ("application/problem+json" if status >= 400 else "application/json")
        self.raw(status, json.dumps(body).encode(), {"content-type": kind, **(headers or {})})

    def raw(self, status: int, body: bytes, headers: dict[str, str]) -> None:
        self._handler.send_response(status)
        for name, value in headers.items():
            self._handler.send_header(name, value)
        self._handler.send_header("content-length", str(len(body)))
        self._handler.end_headers()
        self._handler.wfile.write(body)

    def events(self, text: str) -> None:
        """An event stream that ends when the connection closes (so a stream cut short looks the same)."""
        self._handler.send_response(200)
        self._handler.send_header("content-type", "text/event-stream")
        self._handler.send_header("connection", "close")
        self._handler.end_headers()
        self._handler.wfile.write(text.encode())
        self._handler.close_connection = True

    def drop(self) -> None:
        """The connection is lost before an answer."""
        self._handler.close_connection = True


class ScriptedServer:
    def __init__(self, answer: Callable[[Seen, Answer, int], None]) -> None:
        self.seen: list[Seen] = []
        seen, lock = self.seen, threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_: Any) -> None:
                pass

            def _answer(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                record = Seen(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, self.rfile.read(length).decode())
                with lock:
                    seen.append(record)
                    count = len(seen)
                answer(record, Answer(self), count)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _answer

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def problem(status: int, title: str, detail: str) -> dict[str, Any]:
    return {"type": "about:blank", "title": title, "status": status, "detail": detail}


def event(id: int, name: str, data: Any) -> str:
    return f"id: {id}\nevent: {name}\ndata: {json.dumps(data)}\n\n"


def simulation_run(id: str) -> dict[str, Any]:
    return {
        "id": id,
        "status": "queued",
        "mode": "FORWARD",
        "fidelity": 1,
        "template": None,
        "prompt": "the printing press reaches Venice",
        "mechanisms": [],
        "progress": {"steps_done": 0, "steps_total": 4, "percent": 0},
        "cost": {"currency": "USD", "estimate_usd": 0.15, "max_usd": 0.2, "actual_usd": 0, "calls": 0, "tokens": {"input": 0, "output": 0, "thinking": 0}},
        "budgets": [],
        "partial": None,
        "error": None,
        "cancel_requested": False,
        "created_at": "2026-01-01T00:00:00.000Z",
        "started_at": None,
        "finished_at": None,
        "links": {
            "self": f"/api/v1/simulations/{id}",
            "result": f"/api/v1/simulations/{id}/result",
            "events": f"/api/v1/simulations/{id}/events",
            "cancel": f"/api/v1/simulations/{id}/cancel",
        },
    }
