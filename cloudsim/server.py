"""HTTP front end: parses requests, routes them, records them, and writes JSON responses."""

import json
import logging
import sys
import threading
import time
import urllib.parse
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from . import control_api, entra, errors, jupyter, prices, prometheus, router
from .agents import AgentPlayer
from .cloud import Cloud
from .errors import ArmError
from .kube import api as kube_api
from .protocol import Request, Response, error_response
from .skus import load_catalog

log = logging.getLogger("cloudsim")
# One line per HTTP request, as http.server writes them; `python -m cloudsim --quiet-requests`
# (CLOUDSIM_LOG_REQUESTS=0, as `make run` sets) turns them off and keeps the rest.
REQUEST_LOG = "cloudsim.requests"

ROUTE_PATH = "/_sim/routes/resolve"
SERVE_PATH = "/_sim/routes/serve"
MAX_BODY = 16 * 1024 * 1024  # Bytes; ARM itself refuses far smaller requests.


def azure_ids(req: Request | None) -> dict[str, str]:
    """The ids ARM puts on every response: x-ms-request-id, new each time, and
    x-ms-correlation-request-id, the client's own when it sent one (ARM keeps it), else new.
    /_sim/requests lists each request's correlation id."""
    sent = req.headers.get("x-ms-correlation-request-id", "") if req else ""
    return {
        "x-ms-request-id": str(uuid.uuid4()),
        "x-ms-correlation-request-id": sent[:128] or str(uuid.uuid4()),
    }


class App:
    """Transport-free request handling, so the logic is testable without sockets."""

    def __init__(self, cloud: Cloud):
        self.cloud = cloud
        self.jupyters = jupyter.JupyterPool(cloud)  # JupyterLab behind workspace addresses.

    def handle(self, req: Request, arrival: float | None = None) -> Response:
        """Answer one request; never raises. ARM, Retail Prices and Kubernetes API requests
        are logged; /k8s/... is a simulated cluster's API server (cloudsim.kube.api), answered
        with Kubernetes Status bodies, not ARM's; Entra ID and Graph paths (cloudsim.entra)
        with theirs."""
        if req.path == ROUTE_PATH:  # Outside the lock: a JupyterLab may take seconds to start.
            return self._guard(lambda: self._route(req))
        if req.path == SERVE_PATH:
            return self._guard(lambda: self._serve_port(req))
        if req.path == "/_sim" or req.path.startswith("/_sim/"):
            return self._guard(lambda: control_api.handle(self.cloud, req))
        entry = {"t": arrival or time.time(), "method": req.method, "path": req.path}
        with self.cloud.lock:
            entry["status"] = None  # Logged on arrival so the log keeps arrival order.
            self.cloud.requests.append(entry)
        self._maybe_hang(req)
        if req.path.startswith("/k8s/"):
            response = kube_api.handle(self.cloud, req)
        elif prometheus.owns(req.path):
            response = prometheus.handle(self.cloud, req)
        elif entra.owns(req.path):
            response = self._guard(lambda: entra.handle(self.cloud, req))
        else:
            response = self._guard(lambda: self._arm(req))
        ids = azure_ids(req)
        for name, value in ids.items():
            response.headers.setdefault(name, value)
        with self.cloud.lock:
            entry["status"] = response.status
            entry["correlation_id"] = response.headers["x-ms-correlation-request-id"]
        return response

    def _route(self, req: Request) -> Response:
        """GET /_sim/routes/resolve?host=&port=: where a workspace address goes (jupyter.py)."""
        host, port = req.query.get("host", ""), req.query.get("port", "")
        if req.method != "GET" or not host or not port.isdigit():
            raise ArmError(400, "InvalidControlRequest", "GET with ?host=...&port=... expected.")
        found = self.jupyters.resolve(host, int(port))
        if found is None:
            raise ArmError(404, "NotFound", f"Nothing listens at {host}:{port}.")
        return Response(200, {"host": found[0], "port": found[1]})

    def _serve_port(self, req: Request) -> Response:
        """POST /_sim/routes/serve {"host", "port"}: a server on another port of a VM."""
        body = req.json()
        host, port = body.get("host"), body.get("port")
        if req.method != "POST" or not isinstance(host, str) or not isinstance(port, int):
            raise ArmError(400, "InvalidControlRequest", 'POST {"host": str, "port": int}.')
        if not self.jupyters.serve(host, port):
            raise ArmError(404, "NotFound", f"No running VM with JupyterLab at {host}.")
        return Response(200, {"host": host, "port": port})

    def _maybe_hang(self, req: Request) -> None:
        """Hold an Azure or Kubernetes API request (not Entra ID's nor Prometheus') for the
        hang's seconds (POST /_sim/hang), outside the lock, so that other requests and /_sim
        keep working; lifting the hang lets it go at once."""
        seconds = self.cloud.hang_seconds
        if seconds and not (entra.owns(req.path) or prometheus.owns(req.path)):
            self.cloud.answering.wait(seconds)

    def _arm(self, req: Request) -> Response:
        handler, params = router.resolve(req.method, req.path)
        if "api-version" not in req.query and router.needs_api_version(req.path):
            raise errors.missing_api_version()
        req.params = params
        with self.cloud.lock:
            self.cloud.advance()
            try:
                return handler(self.cloud, req)
            finally:
                self.cloud.meter()  # What the request changed is billed from now.

    @staticmethod
    def _guard(action: Callable[[], Response]) -> Response:
        try:
            return action()
        except ArmError as err:
            return error_response(err)
        except Exception:  # A bug must cost one request, never the server.
            log.exception("unhandled error")
            message = "The emulator hit an unexpected error."
            return error_response(ArmError(500, "InternalServerError", message))


class _HttpServer(ThreadingHTTPServer):
    daemon_threads = True
    app: App

    def handle_error(self, request, client_address) -> None:
        # A client that drops a keep-alive connection (the SDK does after an unread 429 body)
        # is normal traffic, not a server fault worth a traceback.
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # Keep-alive, as the Azure SDK's requests session expects.
    # Headers and body go out as two writes; with Nagle on, the body waits for the client's
    # delayed ACK (~40 ms per response on Linux).
    disable_nagle_algorithm = True
    server_version = "cloudsim/1.0"
    server: _HttpServer

    def _serve(self) -> None:
        arrival = time.time()
        body = self._read_body()
        if body is None:
            self.close_connection = True  # The stream position is unknown now.
            self._send(error_response(errors.invalid_content("unreadable request body")))
            return
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qsl(url.query, keep_blank_values=True)
        req = Request(
            method=self.command,
            path=urllib.parse.unquote(url.path),
            query={k.lower(): v for k, v in query},
            headers=self._headers(),
            body=body,
            base_url=self._base_url(),
        )
        self._send(self.server.app.handle(req, arrival))

    do_GET = do_PUT = do_POST = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _serve

    def _headers(self) -> dict[str, str]:
        """Lower-case names; repeated lines joined with ", " (RFC 9110 section 5.3), so e.g.
        every Impersonate-Group line of a Kubernetes request reaches its handler."""
        found: dict[str, str] = {}
        for name, value in self.headers.items():
            key = name.lower()
            found[key] = f"{found[key]}, {value}" if key in found else value
        return found

    def _base_url(self) -> str:
        host = self.headers.get("Host")
        if not host:
            address, port = self.server.server_address[:2]
            host = f"{address}:{port}"
        return f"http://{host}"

    def _read_body(self) -> bytes | None:
        """The request body, or None when it is malformed or too large."""
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            return self._read_chunked()
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            return None
        if length < 0 or length > MAX_BODY:
            return None
        return self.rfile.read(length)

    def _read_chunked(self) -> bytes | None:
        data = b""
        try:
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline().strip():
                        pass  # Skip trailers up to the blank line.
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
                if len(data) > MAX_BODY:
                    return None
        except ValueError:
            return None

    def _send(self, response: Response) -> None:
        raw = isinstance(response.body, bytes)  # Sent as is, typed by its Content-Type header.
        if raw:
            payload = response.body
        else:
            payload = b"" if response.body is None else json.dumps(response.body).encode()
        self.send_response(response.status)
        if payload and not raw:
            self.send_header("Content-Type", "application/json; charset=utf-8")
        if response.status != 204:
            self.send_header("Content-Length", str(len(payload)))
        for name, value in azure_ids(None).items():  # /_sim answers: App.handle set none.
            if name not in response.headers:
                self.send_header(name, value)
        for name, value in response.headers.items():
            self.send_header(name, value)
        self.end_headers()
        if payload and self.command != "HEAD":
            self.wfile.write(payload)

    def log_message(self, format: str, *args) -> None:
        logging.getLogger(REQUEST_LOG).info("%s %s", self.address_string(), format % args)


class SimServer:
    """A running emulator: `url` ("http://127.0.0.1:PORT"), `state` (the Cloud), `shutdown()`.

    `agent_player` plays the VMs' telemetry agents while serving (None with agents=False)."""

    def __init__(
        self,
        httpd: _HttpServer,
        thread: threading.Thread | None = None,
        agent_player: AgentPlayer | None = None,
    ):
        self._httpd = httpd
        self._thread = thread
        self.state: Cloud = httpd.app.cloud
        self.agent_player = agent_player

    @property
    def url(self) -> str:
        """Base URL to give the Azure SDK clients, e.g. "http://127.0.0.1:8100"."""
        host, port = self._httpd.server_address[:2]
        host = "127.0.0.1" if host in ("", "0.0.0.0") else host
        return f"http://{host}:{port}"

    @property
    def control(self):
        """A SimControl client for this server."""
        from .control import SimControl

        return SimControl(self.url)

    def serve_forever(self) -> None:
        """Serve in the calling thread until shutdown() (used by `python -m cloudsim`)."""
        self.start_agents()
        self._httpd.serve_forever(poll_interval=0.2)

    def start_agents(self) -> None:
        """Start playing the VMs' telemetry agents (idempotent; no-op with agents=False)."""
        if self.agent_player is not None:
            self.agent_player.start()

    def shutdown(self) -> None:
        """Stop serving and close the socket (idempotent enough for fixtures)."""
        if self.agent_player is not None:
            self.agent_player.stop()
        self._httpd.app.jupyters.shutdown()
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._httpd.server_close()

    def __enter__(self) -> "SimServer":
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()


def make_server(
    host: str = "127.0.0.1",
    port: int = 0,
    latency: float = 0.0,
    retry_after: int = 0,
    catalog: str | Path | None = None,
    *,
    agents: bool = True,
    agent_profile: str = "busy",
) -> SimServer:
    """Bind (port 0 = any free port) without serving yet; latency in seconds per LRO.

    agents: play each running VM's telemetry agent once serving; agent_profile: their default
    GPU-use profile ("busy", "batch", "idle", "spiky" or "silent"). The Retail Prices API's
    book starts as the portal's price snapshot (cloudsim.prices.book_from_snapshot)."""
    cloud = Cloud(
        load_catalog(catalog),
        latency=latency,
        retry_after=retry_after,
        agent_profile=agent_profile,
        prices=prices.book_from_snapshot(),
    )
    httpd = _HttpServer((host, port), _Handler)
    httpd.app = App(cloud)
    return SimServer(httpd, agent_player=AgentPlayer(cloud) if agents else None)


def start_server(
    host: str = "127.0.0.1",
    port: int = 0,
    latency: float = 0.0,
    retry_after: int = 0,
    catalog: str | Path | None = None,
    *,
    agents: bool = True,
    agent_profile: str = "busy",
) -> SimServer:
    """Start the emulator in a daemon thread; returns a SimServer (`.url`, `.state`, `.shutdown()`).

    latency: seconds each LRO stays InProgress; retry_after: Retry-After seconds on LROs;
    catalog: CSV path (default data/azure_gpu_vms.csv); agents, agent_profile: see make_server."""
    sim = make_server(
        host, port, latency, retry_after, catalog, agents=agents, agent_profile=agent_profile
    )
    thread = threading.Thread(target=sim.serve_forever, name="cloudsim", daemon=True)
    sim._thread = thread
    sim.start_agents()
    thread.start()
    return sim
