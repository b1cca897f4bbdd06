"""The web process as the Procfile runs it: gunicorn with uvicorn workers (ASGI).

Open pages hold one server-sent event stream each (live/streams.py): thousands of idle
connections, which sync WSGI workers cannot hold. So ``/live/stream/`` goes to Django's ASGI
handler, where a stream is a coroutine of the process's event loop; every other request goes,
unchanged, to the WSGI application of portal/wsgi.py (the heartbeat fast path, the frozen
start-up objects) through asgiref's WsgiToAsgi, which runs it one request at a time per
process in one thread, as a sync gunicorn worker did.
"""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

from asgiref.wsgi import WsgiToAsgi  # noqa: E402
from django.core.asgi import get_asgi_application  # noqa: E402

django_asgi = get_asgi_application()

from portal.wsgi import application as wsgi_application  # noqa: E402 (after setup)


def _trimmed_headers(app):
    """Django's WSGI handler writes Set-Cookie values with a leading space, which WSGI servers
    trim and ASGI's h11 refuses ("Illegal header value"): trim them here."""

    def trimmed(environ, start_response):
        def start(status, headers, exc_info=None):
            return start_response(status, [(k, v.strip()) for k, v in headers], exc_info)

        return app(environ, start)

    return trimmed


wsgi_as_asgi = WsgiToAsgi(_trimmed_headers(wsgi_application))
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
            await send({"type": "lifespan.shutdown.complete"})
            return
