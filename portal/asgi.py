"""The web process as the Procfile runs it: gunicorn with uvicorn workers (ASGI).

Open pages hold one server-sent event stream each (live/streams.py): thousands of idle
connections, which sync WSGI workers cannot hold. So ``/live/stream/`` goes to Django's ASGI
handler, where a stream is a coroutine of the process's event loop; every other request goes,
unchanged, to the WSGI application of portal/wsgi.py (the heartbeat fast path, the frozen
start-up objects) through a2wsgi, which runs it in a pool of PORTAL_WSGI_THREADS threads per
process, as gunicorn's gthread workers would. (asgiref's WsgiToAsgi, tried first, failed
concurrent requests with "CurrentThreadExecutor already quit" and refused the leading space
Django's WSGI handler writes in Set-Cookie values; a2wsgi does neither.)
"""

import asyncio
import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

from a2wsgi import WSGIMiddleware  # noqa: E402
from django.core.asgi import get_asgi_application  # noqa: E402

django_asgi = get_asgi_application()

from portal.wsgi import application as wsgi_application  # noqa: E402 (after setup)
from workspaces import heartbeats  # noqa: E402

# Threads per process running WSGI requests, as gunicorn's gthread workers would.
WSGI_THREADS = int(os.environ.get("PORTAL_WSGI_THREADS", "4"))
wsgi_as_asgi = WSGIMiddleware(wsgi_application, workers=WSGI_THREADS)
STREAM_PREFIX = "/live/stream/"


async def application(scope, receive, send):
    """ASGI entry point: see the module docstring."""
    if scope["type"] == "lifespan":
        await _lifespan(receive, send)
    elif scope["type"] == "http" and scope["path"].startswith(STREAM_PREFIX):
        await django_asgi(scope, receive, send)
    elif scope["type"] == "http":
        await wsgi_as_asgi(scope, receive, send)
    # Websockets: none served; the connection is closed by the server.


async def _lifespan(receive, send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            # uvicorn ends its worker by re-raising SIGTERM, so atexit handlers never run:
            # store the heartbeats still queued here (the requests are all answered by now).
            await asyncio.to_thread(heartbeats.BUFFER.flush)
            await send({"type": "lifespan.shutdown.complete"})
            return
