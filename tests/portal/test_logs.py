"""Structured logs: a request's lines carry the request id its response shows; a workspace
task's lines carry the workspace id; lines after an Azure call carry the correlation id the
emulator sent; secrets never reach a line. Errors reach Sentry (a local HTTP receiver stands
in for sentry.io) when SENTRY_DSN is set."""

import gzip
import io
import json
import logging
import re
import threading
import time
import uuid
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import structlog
from django.test import Client
from django.urls import path
from django.utils import timezone

from portal import logs
from portal import urls as portal_urls
from portal.sentry import sentry_init
from tests.factories import SSH_KEY, OfferingFactory
from workspaces.api import heartbeat_fast_path
from workspaces.backends.vm_request import workspace_request
from workspaces.states import Status

HEX32 = re.compile(r"[0-9a-f]{32}")


@pytest.fixture
def lines(settings):
    """Every line logged during the test, as the JSON formatter of settings.LOGGING writes it."""
    assert settings.LOGGING["formatters"]["structured"]["()"] is logs.formatter
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logs.formatter("json"))
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    structlog.contextvars.clear_contextvars()
    yield lambda: [json.loads(line) for line in stream.getvalue().splitlines()]
    root.removeHandler(handler)
    root.setLevel(old_level)
    structlog.contextvars.clear_contextvars()


@pytest.mark.django_db
def test_a_requests_lines_carry_the_request_id_its_response_shows(client, lines):
    response = client.get("/no-such-page/")
    request_id = response["X-Request-ID"]
    assert response.status_code == 404 and HEX32.fullmatch(request_id)
    (line,) = [x for x in lines() if x["logger"] == "django.request"]
    assert (line["event"], line["request_id"]) == ("Not Found: /no-such-page/", request_id)
    kept = client.get("/no-such-page/", headers={"X-Request-ID": "afd-20261124T1500Z-4f2a"})
    assert kept["X-Request-ID"] == "afd-20261124T1500Z-4f2a"
    assert lines()[-1]["request_id"] == "afd-20261124T1500Z-4f2a"
    for hostile in ('a" b\n{"level": "info"}', "x" * 129, ""):
        replaced = client.get("/no-such-page/", headers={"X-Request-ID": hostile})
        assert HEX32.fullmatch(replaced["X-Request-ID"])
        assert lines()[-1]["request_id"] == replaced["X-Request-ID"]


@pytest.mark.django_db(transaction=True)  # The fast path closes old connections, as Django.
def test_a_heartbeat_on_the_fast_path_gets_a_request_id_too(lines, settings):
    settings.ALLOWED_HOSTS = ["portal.example"]
    environ = {
        "PATH_INFO": f"/api/workspaces/{uuid.uuid4()}/heartbeat/",
        "REQUEST_METHOD": "POST",
        "HTTP_HOST": "portal.example",
        "HTTP_AUTHORIZATION": "Bearer not-a-token",
        "HTTP_X_REQUEST_ID": "agent-7",
        "CONTENT_LENGTH": "2",
        "wsgi.input": io.BytesIO(b"{}"),
        "REMOTE_ADDR": "10.0.0.4",
    }
    answer = {}
    heartbeat_fast_path(None)(environ, lambda status, headers: answer.update(headers))
    assert answer["X-Request-ID"] == "agent-7"
    assert [x["request_id"] for x in lines() if x["logger"].startswith("workspaces")] in (
        [],
        ["agent-7"] * len([x for x in lines() if x["logger"].startswith("workspaces")]),
    )


@pytest.mark.django_db(transaction=True)
def test_a_workspace_tasks_lines_carry_its_id_and_azure_correlation_ids(cast, sim, lines):
    ws = workspace_request(
        user=cast.researcher,
        team=cast.team,
        name="llm-finetune",
        offering=OfferingFactory(),
        ssh_public_key=SSH_KEY,
        request_key=uuid.uuid4(),
        now=timezone.now(),
    )
    ws.refresh_from_db()
    assert ws.status == Status.RUNNING
    task_lines = [x for x in lines() if x.get("task") == "workspaces.tasks.advance_workspace"]
    assert task_lines and all(x["workspace_id"] == str(ws.pk) for x in task_lines)
    azure = [x for x in task_lines if x["logger"] == "cloud.azure"]
    assert {x["event"] for x in azure} == {"azure response"} and len(azure) >= 3
    sent = {r["correlation_id"] for r in sim.requests()}
    # Each line names the Azure answer it follows: the emulator's own correlation ids.
    assert all(x["azure_correlation_id"] in sent for x in azure)
    assert len({x["azure_correlation_id"] for x in azure}) >= 3
    succeeded = [x for x in task_lines if "succeeded" in x["event"]]
    assert succeeded and succeeded[-1]["azure_correlation_id"] in sent
    assert not any(x.get("workspace_id") for x in lines() if "task" not in x)
    text = json.dumps(lines())
    assert "Bearer" not in text and "emulator-token" not in text


def test_a_worker_runs_a_task_with_the_request_id_it_was_queued_under(
    cast,
    sim,
    celery_worker_thread,
    lines,  # lines after the worker: its start reapplies LOGGING.
):
    structlog.contextvars.bind_contextvars(request_id="req-queued-1")  # As the middleware does.
    ws = workspace_request(
        user=cast.researcher,
        team=cast.team,
        name="llm-finetune",
        offering=OfferingFactory(),
        ssh_public_key=SSH_KEY,
        request_key=uuid.uuid4(),
        now=timezone.now(),
    )
    deadline = time.monotonic() + 30
    while ws.status != Status.RUNNING:
        assert time.monotonic() < deadline, ws.status
        time.sleep(0.1)
        ws.refresh_from_db()
    structlog.contextvars.clear_contextvars()
    # The worker logs "succeeded" just after the task's commit: wait for it, to a deadline.
    task = "workspaces.tasks.advance_workspace"
    while not any(x.get("task") == task and "succeeded" in str(x.get("event")) for x in lines()):
        assert time.monotonic() < deadline, "the worker's 'succeeded' line"
        time.sleep(0.05)
    worker = [x for x in lines() if x.get("task") == "workspaces.tasks.advance_workspace"]
    assert worker and {(x["request_id"], x["workspace_id"]) for x in worker} == {
        ("req-queued-1", str(ws.pk))
    }


def test_secret_named_values_are_redacted_at_any_depth(lines):
    structlog.contextvars.bind_contextvars(request_id="r1")
    logging.getLogger("portal.test").warning(
        "calling", extra={"headers": {"Authorization": "Bearer abc", "Accept": "json"}}
    )
    structlog.get_logger("portal.test").info("token", access_token="abc", client_secret="def")
    first, second = lines()
    assert first["headers"] == {"Authorization": "[redacted]", "Accept": "json"}
    assert (second["access_token"], second["client_secret"]) == ("[redacted]", "[redacted]")
    assert first["request_id"] == second["request_id"] == "r1"


def test_console_format_is_readable_and_unknown_formats_are_refused():
    record = logging.LogRecord("portal.x", logging.INFO, __file__, 1, "hello %s", ("you",), None)
    assert "hello you" in logs.formatter("console").format(record)
    with pytest.raises(ValueError, match="LOG_FORMAT"):
        logs.formatter("xml")


# --- Sentry -----------------------------------------------------------------------------------


def broken_view(request):
    raise RuntimeError("the GPU fell off")


# The portal's own URLs (its 500 page links to them) plus one view that fails.
urlpatterns = [path("broken/", broken_view), *portal_urls.urlpatterns]


class Receiver(BaseHTTPRequestHandler):
    """Stands in for Sentry's ingest: keeps each envelope POSTed to /api/<project>/envelope/."""

    envelopes: list[bytes] = []

    def do_POST(self):
        raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        encoding = self.headers.get("Content-Encoding", "")
        if encoding == "gzip":
            raw = gzip.decompress(raw)
        elif encoding == "deflate":
            raw = zlib.decompress(raw)
        Receiver.envelopes.append(self.path.encode() + b"\n" + raw)
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def receiver():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    Receiver.envelopes = []
    yield server
    server.shutdown()
    import sentry_sdk

    sentry_sdk.init()  # No DSN: the rest of the suite sends nothing.


@pytest.mark.django_db
def test_an_exception_in_a_view_posts_an_event_to_sentry(receiver, settings):
    settings.ROOT_URLCONF = __name__
    port = receiver.server_address[1]
    assert sentry_init(dsn=f"http://public@127.0.0.1:{port}/42", environment="test")
    assert not sentry_init(dsn="", environment="test")
    client = Client(raise_request_exception=False)
    response = client.get(
        "/broken/", headers={"Authorization": "Bearer hush-hush", "Cookie": "sessionid=hush2"}
    )
    assert response.status_code == 500
    import sentry_sdk

    sentry_sdk.flush(timeout=5)
    (envelope,) = [e for e in Receiver.envelopes if b"the GPU fell off" in e]
    assert envelope.startswith(b"/api/42/envelope/")
    assert b"RuntimeError" in envelope and b'"environment":"test"' in envelope.replace(b" ", b"")
    assert b"hush-hush" not in envelope and b"hush2" not in envelope


@pytest.mark.django_db
def test_a_token_in_the_query_string_never_reaches_a_log_line(client, lines):
    """A refused ?access_token= (and OAuth's code, SAS signatures…) is logged redacted: the
    django.request warning carries the request, whose repr holds the full URL."""
    response = client.get("/api/v1/me?access_token=SECRET-TOKEN-1&code=SECRET-CODE-2&page=3")
    assert response.status_code == 401
    text = json.dumps(lines())
    assert "SECRET-TOKEN-1" not in text and "SECRET-CODE-2" not in text
    assert "access_token=[redacted]" in text and "page=3" in text


def test_access_lines_of_gunicorn_and_uvicorn_are_redacted():
    """The Procfile's gunicorn logs uvicorn's access lines through its own handlers."""
    from gunicorn.config import Config

    from portal import gunicorn_conf

    config = Config()
    config.set("accesslog", "-")
    config.set("logger_class", gunicorn_conf.logger_class)
    logger = config.logger_class(config)
    stream = io.StringIO()
    [handler] = logger.access_log.handlers
    handler.setStream(stream)
    uvicorn_access = logging.getLogger("uvicorn.access.redaction-test")
    uvicorn_access.handlers, uvicorn_access.propagate = [handler], False
    uvicorn_access.setLevel(logging.INFO)
    uvicorn_access.info(  # uvicorn's own format and arguments
        '%s - "%s %s HTTP/%s" %d',
        "10.0.0.9:51234", "GET", "/api/v1/me?token=SECRET-3&sig=SECRET-4&sv=2024", "1.1", 401,
    )  # fmt: skip
    line = stream.getvalue()
    assert "SECRET-3" not in line and "SECRET-4" not in line
    assert '"GET /api/v1/me?token=[redacted]&sig=[redacted]&sv=2024 HTTP/1.1" 401' in line


@pytest.mark.django_db
@pytest.mark.parametrize("log_format", logs.FORMATS)
def test_a_refused_request_is_one_line_without_a_traceback(client, cast, log_format):
    """A 403 is a normal event (`make run` printed ~150 lines of traceback with locals)."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logs.formatter(log_format))
    logging.getLogger("django.request").addHandler(handler)
    try:
        client.force_login(cast.researcher)
        response = client.get("/teams/vision/webhooks/")  # team admins only
        missing = client.get("/teams/no-such-team/")
    finally:
        logging.getLogger("django.request").removeHandler(handler)
    assert (response.status_code, missing.status_code) == (403, 404)
    written = stream.getvalue().splitlines()
    assert len(written) == 2, written
    assert "Forbidden (Permission denied): /teams/vision/webhooks/" in written[0]
    assert "Traceback" not in stream.getvalue() and "exception" not in stream.getvalue()


def test_a_server_error_keeps_its_traceback():
    record = logging.LogRecord("django.request", logging.ERROR, __file__, 1, "boom", (), None)
    try:
        raise RuntimeError("the cause")
    except RuntimeError:
        import sys

        record.exc_info = sys.exc_info()
    record.status_code = 500
    line = json.loads(logs.formatter("json").format(record))
    assert "RuntimeError: the cause" in line["exception"]
