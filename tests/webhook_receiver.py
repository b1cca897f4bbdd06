"""A local HTTP receiver for webhook tests and the lag benchmark: a thread serving
http.server on 127.0.0.1 that records every POST (path, headers, body, when) and answers
each path with the statuses it was told, in turn (200 once they run out)."""

import json
import threading
import time
from collections import defaultdict, deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float  # time.time() when it arrived

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Receiver:
    server: ThreadingHTTPServer
    received: list[Received] = field(default_factory=list)
    answers: dict[str, deque] = field(default_factory=lambda: defaultdict(deque))
    delay: dict[str, float] = field(default_factory=dict)
    arrived: threading.Condition = field(default_factory=threading.Condition)

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"

    def answer(self, path: str, *statuses: int) -> None:
        """Answer the next POSTs to ``path`` with ``statuses``, in turn."""
        self.answers[path].extend(statuses)

    def at(self, path: str) -> list[Received]:
        return [r for r in self.received if r.path == path]

    def wait_for(self, count: int, timeout: float = 10.0) -> list[Received]:
        """Block until ``count`` requests arrived in all (or ``timeout`` seconds passed)."""
        with self.arrived:
            self.arrived.wait_for(lambda: len(self.received) >= count, timeout)
        return list(self.received)


def start_receiver() -> Receiver:
    holder: dict[str, Receiver] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            receiver = holder["r"]
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            with receiver.arrived:
                receiver.received.append(
                    Received(self.path, dict(self.headers.items()), body, time.time())
                )
                receiver.arrived.notify_all()
            time.sleep(receiver.delay.get(self.path, 0))
            queue = receiver.answers[self.path]
            status = queue.popleft() if queue else 200
            payload = b"ok" if status < 400 else b"invalid_token"
            try:
                self.send_response(status)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except OSError:  # the client gave up (a timeout test)
                pass

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    holder["r"] = Receiver(server)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return holder["r"]
