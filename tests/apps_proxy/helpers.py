"""The app proxy (apps_proxy.asgi) served by uvicorn in a thread, on a port of its own, routed to
the emulator's JupyterLab processes; and a Running VM workspace made from an environment (so its
cloud-init starts JupyterLab), through the portal's own request path (Celery eager)."""

import asyncio
import contextlib
import socket
import threading
import time
import uuid
from collections.abc import Iterator

import uvicorn
from django.utils import timezone

from environments.demo import seed_demo_environments
from tests.agents import agent_reports_ready
from tests.factories import SSH_KEY, OfferingFactory
from workspaces.backends.vm_request import workspace_request
from workspaces.models import Workspace


def running_lab_vm(cast, name="lab-vm", owner=None):
    seed_demo_environments(now=timezone.now())
    ws = workspace_request(
        user=owner or cast.researcher,
        team=cast.team,
        name=name,
        offering=OfferingFactory(),
        ssh_public_key=SSH_KEY,
        request_key=uuid.uuid4(),
        now=timezone.now(),
    )
    # Eager Celery leaves it Setting up: its agent (played here: no live portal) reports the
    # environment set up and JupyterLab answering.
    agent_reports_ready(ws.pk, now=timezone.now(), clock=timezone.now)
    return Workspace.objects.get(pk=ws.pk)


class ProxyServer:
    def __init__(self, port: int):
        self.port = port

    def host(self, label: str) -> str:
        return f"{label}.apps.localhost:{self.port}"

    def origin(self, label: str) -> str:
        return f"http://{self.host(label)}"


@contextlib.contextmanager
def serve_proxy(settings, sim_server) -> Iterator[ProxyServer]:
    from apps_proxy import access, asgi  # noqa: PLC0415 (it sets Django up: after pytest-django)

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    settings.APPS_DOMAIN = "apps.localhost"
    settings.APPS_URL_SCHEME = "http"
    settings.APPS_PORT = port
    settings.WORKSPACE_ROUTE_RESOLVER = f"{sim_server.url}/_sim/routes/resolve"
    access._routes.clear()
    access._open.clear()  # Each server runs its own event loop.
    config = uvicorn.Config(
        asgi.application, log_level="warning", lifespan="off", ws="websockets-sansio"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])), daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        yield ProxyServer(port)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
        asyncio.run(asgi.close_database())  # Its connection, so the test database can go.
