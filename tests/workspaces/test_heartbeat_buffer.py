"""Heartbeats as production takes them: answered in front of Django's middleware
(portal.wsgi), queued per process and stored in batches (workspaces.heartbeats)."""

import dataclasses
import io
import json
import threading
from collections import Counter
from datetime import timedelta

import pytest
from django.core import signals
from django.db import OperationalError, close_old_connections, connection
from django.utils import timezone

from portal.wsgi import application
from tests.workspaces.test_heartbeat import _running, sample
from workspaces import heartbeats, telemetry
from workspaces.actions import workspace_delete
from workspaces.models import TelemetrySample, WorkspaceAgent


def wsgi_post(
    ws_id, token, body, *, host="127.0.0.1", method="POST", client="127.0.0.1", forwarded=""
):
    """(status line, headers, JSON) from the portal's WSGI application, as gunicorn calls it
    for a request from address ``client`` (with X-Forwarded-For ``forwarded``, if any)."""
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    environ = {
        "REQUEST_METHOD": method,
        "PATH_INFO": f"/api/workspaces/{ws_id}/heartbeat/",
        "SERVER_NAME": host,
        "SERVER_PORT": "80",
        "REMOTE_ADDR": client,
        "HTTP_HOST": host,
        "CONTENT_TYPE": "application/json",
        "CONTENT_LENGTH": str(len(raw)),
        "HTTP_AUTHORIZATION": f"Bearer {token}",
        "wsgi.input": io.BytesIO(raw),
        "wsgi.url_scheme": "http",
        "wsgi.errors": io.StringIO(),
    }
    if forwarded:
        environ["HTTP_X_FORWARDED_FOR"] = forwarded
    answer = {}

    def start_response(status, headers, exc_info=None):
        answer.update(status=status, headers=dict(headers))

    # As Django's test client does: the test's transaction must outlive the request.
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    try:
        content = b"".join(application(environ, start_response))
    finally:
        signals.request_started.connect(close_old_connections)
        signals.request_finished.connect(close_old_connections)
    is_json = answer["headers"].get("Content-Type") == "application/json"
    return answer["status"], answer["headers"], json.loads(content) if is_json else content


@pytest.fixture
def buffered(settings, monkeypatch):
    """The production setting, with a buffer the test flushes itself."""
    settings.HEARTBEAT_FLUSH_SECONDS = 0.25
    buffer = heartbeats.HeartbeatBuffer(flush_thread=False)
    monkeypatch.setattr(heartbeats, "BUFFER", buffer)
    return buffer


@pytest.mark.django_db
def test_a_heartbeat_is_queued_then_stored_and_folded_by_the_flush(cast, buffered):
    ws, token = _running(cast)
    now = timezone.now()
    body = {"samples": [sample(now - timedelta(seconds=30), util=0), sample(now, util=91)]}

    status, _, doc = wsgi_post(ws.pk, token, body)

    assert status == "202 Accepted" and doc == {"accepted": 2, "interval_seconds": 30.0}
    assert TelemetrySample.objects.filter(workspace=ws).count() == 0
    assert buffered.flush() == 1
    assert TelemetrySample.objects.filter(workspace=ws).count() == 2
    agent = WorkspaceAgent.objects.get(pk=ws.pk)
    assert agent.last_at == now.replace(microsecond=now.microsecond) and agent.gpus[0]["util"] == 91


@pytest.mark.django_db
def test_one_flush_stores_many_heartbeats_with_the_same_queries(
    cast, buffered, django_assert_num_queries
):
    fleet = [_running(cast) for _ in range(12)]
    now = timezone.now()
    for ws, token in fleet[:1]:
        wsgi_post(ws.pk, token, {"samples": [sample(now)]})
    with django_assert_num_queries(3 + 2):  # + the savepoint and its release
        buffered.flush()
    for step in range(1, 4):  # three heartbeats each, one flush: in arrival order
        for ws, token in fleet:
            wsgi_post(ws.pk, token, {"samples": [sample(now + timedelta(seconds=30 * step))]})
    with django_assert_num_queries(3 + 2):
        assert buffered.flush() == 36
    assert TelemetrySample.objects.count() == 1 + 36
    last = {a.last_at for a in WorkspaceAgent.objects.filter(pk__in=[ws.pk for ws, _ in fleet])}
    assert last == {now + timedelta(seconds=90)}


@pytest.mark.django_db
def test_a_flush_drops_repeats_and_a_deleted_workspaces_samples(cast, buffered):
    ws, token = _running(cast)
    gone, gone_token = _running(cast)
    at = timezone.now()
    wsgi_post(ws.pk, token, {"samples": [sample(at)]})
    wsgi_post(ws.pk, token, {"samples": [sample(at)]})  # the agent's retry after a timeout
    wsgi_post(gone.pk, gone_token, {"samples": [sample(at)]})
    workspace_delete(user=cast.researcher, workspace=gone, now=at)

    buffered.flush()

    assert list(TelemetrySample.objects.values_list("workspace_id", flat=True)) == [ws.pk]


@pytest.mark.django_db
def test_a_full_buffer_answers_503_with_retry_after_and_keeps_nothing(cast, buffered, settings):
    settings.HEARTBEAT_BUFFER_MAX = 1
    ws, token = _running(cast)
    wsgi_post(ws.pk, token, {"samples": [sample()]})

    status, headers, doc = wsgi_post(ws.pk, token, {"samples": [sample()]})

    assert status == "503 Service Unavailable" and headers["Retry-After"] == "5"
    assert "retry later" in doc["error"]
    assert buffered.pending() == 1


@pytest.mark.django_db
def test_heartbeats_whose_storing_failed_stay_queued_for_the_next_flush(
    cast, buffered, monkeypatch
):
    ws, token = _running(cast)
    wsgi_post(ws.pk, token, {"samples": [sample()]})
    real_store = heartbeats.heartbeats_store

    def database_down(**kwargs):
        raise OperationalError("connection to server at 127.0.0.1, port 5432 failed")

    monkeypatch.setattr(heartbeats, "heartbeats_store", database_down)
    buffered.flush()
    assert buffered.pending() == 1

    monkeypatch.setattr(heartbeats, "heartbeats_store", real_store)
    buffered.flush()
    assert buffered.pending() == 0 and TelemetrySample.objects.filter(workspace=ws).count() == 1


@pytest.mark.django_db
def test_a_checked_token_is_trusted_without_a_query_until_it_is_revoked(
    cast, settings, django_assert_num_queries
):
    ws, token = _running(cast)
    at = timezone.now()
    heartbeats.heartbeat_authenticate(workspace_id=ws.pk, token=token, now=at)
    with django_assert_num_queries(0):
        heartbeats.heartbeat_authenticate(workspace_id=ws.pk, token=token, now=at)
    with pytest.raises(telemetry.HeartbeatRefused) as wrong:
        heartbeats.heartbeat_authenticate(workspace_id=ws.pk, token=token + "x", now=at)
    assert wrong.value.status == 401

    telemetry.agent_token_revoke(workspace_id=ws.pk, now=at)

    with pytest.raises(telemetry.HeartbeatRefused) as revoked:
        heartbeats.heartbeat_authenticate(workspace_id=ws.pk, token=token, now=at)
    assert revoked.value.status == 410


@pytest.mark.django_db
def test_a_cached_token_is_checked_again_once_its_time_is_up(cast, settings):
    settings.HEARTBEAT_AUTH_CACHE_SECONDS = 30
    ws, token = _running(cast)
    at = timezone.now()
    heartbeats.heartbeat_authenticate(workspace_id=ws.pk, token=token, now=at)
    # Revoked by another process: this one's cache does not know.
    WorkspaceAgent.objects.filter(pk=ws.pk).update(revoked_at=at)
    heartbeats.heartbeat_authenticate(
        workspace_id=ws.pk, token=token, now=at + timedelta(seconds=29)
    )
    with pytest.raises(telemetry.HeartbeatRefused) as revoked:
        heartbeats.heartbeat_authenticate(
            workspace_id=ws.pk, token=token, now=at + timedelta(seconds=31)
        )
    assert revoked.value.status == 410


@pytest.mark.django_db
@pytest.mark.parametrize(
    "change, expected",
    [
        ({"method": "GET"}, "405"),  # Django's routed view: POST only
        ({"host": "evil.example"}, "400"),  # Django's ALLOWED_HOSTS check
    ],
)
def test_what_the_fast_path_does_not_take_goes_to_django(cast, buffered, change, expected):
    ws, token = _running(cast)

    status, _, _ = wsgi_post(ws.pk, token, {"samples": [sample()]}, **change)

    assert status.startswith(expected) and buffered.pending() == 0


@pytest.mark.django_db
def test_bad_heartbeats_get_the_same_answers_on_the_fast_path(cast, buffered):
    ws, token = _running(cast)
    assert wsgi_post(ws.pk, "wrong", {"samples": [sample()]})[0] == "401 Unauthorized"
    status, _, doc = wsgi_post(ws.pk, token, {"samples": []})
    assert status == "400 Bad Request" and doc == {"error": "'samples' must be a non-empty list."}
    assert buffered.pending() == 0


@pytest.mark.django_db(transaction=True)
def test_the_flush_thread_stores_queued_heartbeats_by_itself(cast, settings, monkeypatch):
    settings.HEARTBEAT_FLUSH_SECONDS = 0.05
    monkeypatch.setattr(heartbeats, "BUFFER", heartbeats.HeartbeatBuffer())
    ws, token = _running(cast)

    assert wsgi_post(ws.pk, token, {"samples": [sample()]})[0] == "202 Accepted"

    stored = threading.Event()
    for _ in range(100):
        if TelemetrySample.objects.filter(workspace=ws).exists():
            stored.set()
            break
        stored.wait(0.05)
    assert stored.is_set()


def _parsed(**over):
    """A sample as the parser hands it on, changed by ``over``: a row that slipped past the
    validation, so storing it is what fails."""
    return dataclasses.replace(
        telemetry.heartbeat_parse(json.dumps({"samples": [sample()]}))[0], **over
    )


@pytest.mark.django_db
def test_a_heartbeat_the_database_refuses_is_dropped_and_the_others_are_stored(
    cast, buffered, caplog
):
    fleet = [_running(cast) for _ in range(5)]
    now = timezone.now()
    poisoned = fleet[2][0]
    for step in range(3):
        for ws, token in fleet:
            at = now + timedelta(seconds=30 * step)
            assert wsgi_post(ws.pk, token, {"samples": [sample(at)]})[0] == "202 Accepted"
        if step == 1:
            # cpu_percent -1 breaks the column's CHECK (>= 0) on PostgreSQL and SQLite alike.
            at = now + timedelta(seconds=45)
            buffered.add(poisoned.pk, [_parsed(at=at, cpu_percent=-1)])

    buffered.flush()

    assert buffered.pending() == 0
    stored = Counter(TelemetrySample.objects.values_list("workspace_id", flat=True))
    assert stored == {ws.pk: 3 for ws, _ in fleet}
    assert f"Dropped a heartbeat of workspace {poisoned.pk}" in caplog.text
    # Nothing is held back for the next flush either.
    for ws, token in fleet:
        wsgi_post(ws.pk, token, {"samples": [sample(now + timedelta(seconds=90))]})
    buffered.flush()
    assert TelemetrySample.objects.count() == 5 * 4


@pytest.mark.django_db
def test_on_postgresql_a_nul_that_slipped_through_blocks_no_other_workspace(cast, buffered):
    if connection.vendor != "postgresql":
        pytest.skip("only PostgreSQL refuses NUL in text and \\u0000 in jsonb")
    victim, victim_token = _running(cast)
    in_text, in_jsonb = _running(cast)[0], _running(cast)[0]
    now = timezone.now()
    buffered.add(in_text.pk, [_parsed(at=now, nvml="550\u0000")])
    gpus = [{"name": "A100\u0000", "util": 1, "mem_used": 1, "mem_total": 2}]
    buffered.add(in_jsonb.pk, [_parsed(at=now, gpus=gpus)])
    wsgi_post(victim.pk, victim_token, {"samples": [sample(now, util=82)]})

    buffered.flush()

    assert list(TelemetrySample.objects.values_list("workspace_id", flat=True)) == [victim.pk]
    assert buffered.pending() == 0


@pytest.mark.django_db
def test_a_nul_from_an_agent_is_refused_with_400_and_never_queued(cast, buffered):
    ws, token = _running(cast)
    status, _, doc = wsgi_post(ws.pk, token, {"samples": [sample(nvml="550\u0000")]})
    assert status == "400 Bad Request" and "printable" in doc["error"]
    assert buffered.pending() == 0
