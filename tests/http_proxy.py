"""A tiny HTTP proxy for tests of clients: it forwards to a live server, records what the
server answered, and can hang up on a request after the server acted (a network failure)."""

import http.server
import threading

import requests


class DroppingProxy:
    """An HTTP proxy to ``upstream`` (the live server's URL). It forwards every request; for
    the first ``drops`` workspace POSTs it then hangs up instead of answering, the network
    failing after the portal acted. ``keys``: the Idempotency-Keys of the POSTs it saw;
    ``answers``: (method, status) of every upstream answer. Stop it with ``server.shutdown()``."""

    def __init__(self, upstream, drops):
        proxy = self
        self.keys, self.drops, self.answers = [], drops, []

        class Handler(http.server.BaseHTTPRequestHandler):
            def _forward(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
                answer = requests.request(
                    self.command, upstream + self.path, headers=headers, data=body, timeout=30
                )
                proxy.answers.append((self.command, answer.status_code))
                if self.command == "POST" and self.path == "/api/v1/workspaces":
                    proxy.keys.append(self.headers.get("Idempotency-Key"))
                    if proxy.drops:
                        proxy.drops -= 1
                        self.close_connection = True
                        return  # the portal made the workspace; the caller hears nothing
                self.send_response(answer.status_code)
                for name in ("Content-Type", "ETag"):
                    if name in answer.headers:
                        self.send_header(name, answer.headers[name])
                self.send_header("Content-Length", str(len(answer.content)))
                self.end_headers()
                self.wfile.write(answer.content)

            do_GET = do_POST = do_DELETE = _forward

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
