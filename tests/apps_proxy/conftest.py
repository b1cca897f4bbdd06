"""The app proxy (apps_proxy.asgi) served by uvicorn in a thread, on a port of its own, routed to
the emulator's JupyterLab processes; the portal's side through Django's test client."""

import asyncio
import socket
import threading
import time

import pytest
import uvicorn


class ProxyServer:
    def __init__(self, port: int):
        self.port = port

    def host(self, label: str) -> str:
        return f"{label}.apps.localhost:{self.port}"


@pytest.fixture
def apps_proxy(settings, sim_server, transactional_db):
    from apps_proxy import asgi

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    settings.APPS_DOMAIN = "apps.localhost"
    settings.APPS_URL_SCHEME = "http"
    settings.APPS_PORT = port
    settings.WORKSPACE_ROUTE_RESOLVER = f"{sim_server.url}/_sim/routes/resolve"
    asgi._routes.clear()
    config = uvicorn.Config(asgi.application, log_level="warning", lifespan="off", ws="websockets")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])), daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    yield ProxyServer(port)
    server.should_exit = True
    thread.join(timeout=10)
    sock.close()
