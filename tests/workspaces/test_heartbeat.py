"""The agents' heartbeat endpoint: token scoped to one workspace and stored hashed, bad
payloads refused with a 400 JSON and never stored."""

import json
from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from tests.factories import WorkspaceFactory
from workspaces import telemetry
from workspaces.actions import workspace_delete, workspace_retry
from workspaces.models import TelemetrySample, WorkspaceAgent
from workspaces.states import Status

pytestmark = pytest.mark.django_db


def _running(cast, **kw):
    ws = WorkspaceFactory(team=cast.team, owner=cast.researcher, status=Status.RUNNING, **kw)
    return ws, telemetry.agent_token_issue(workspace_id=ws.pk, now=timezone.now())


def sample(when=None, util=87, ssh=1, **over):
    doc = {
        "at": (when or timezone.now()).astimezone(UTC).isoformat().replace("+00:00", "Z"),
        "nvml": "ok",
        "gpus": [
            {
                "index": 0,
                "name": "NVIDIA A100 80GB PCIe",
                "util_percent": util,
                "mem_used_mib": 30512,
                "mem_total_mib": 81920,
                "processes": 2,
                "mig_profile": None,
            }
        ],
        "ssh_sessions": ssh,
        "jupyter_busy_kernels": 0,
        "cpu_percent": 41.5,
    }
    doc.update(over)
    return doc


def post(client, ws, token, body):
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return client.post(
        reverse("agent-heartbeat", args=[ws.pk]),
        raw,
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}"},
    )


def test_a_heartbeat_is_accepted_stored_and_shown(client, cast):
    ws, token = _running(cast)
    now = timezone.now()
    answer = post(
        client, ws, token, {"samples": [sample(now - timedelta(seconds=30)), sample(now)]}
    )
    assert answer.status_code == 202
    assert answer.json() == {"accepted": 2, "interval_seconds": 30.0}
    assert TelemetrySample.objects.filter(workspace=ws).count() == 2
    agent = WorkspaceAgent.objects.get(pk=ws.pk)
    assert agent.gpus == [
        {"name": "NVIDIA A100 80GB PCIe", "util": 87, "mem_used": 30512, "mem_total": 81920}
    ]
    assert agent.interactive == 1 and agent.cpu_percent == 42
    assert abs(agent.last_at - now) < timedelta(seconds=1)


def test_a_resent_batch_is_not_stored_twice(client, cast):
    ws, token = _running(cast)
    batch = {"samples": [sample()]}
    post(client, ws, token, batch)
    again = post(client, ws, token, batch)
    assert again.status_code == 202 and again.json()["accepted"] == 0
    assert TelemetrySample.objects.filter(workspace=ws).count() == 1


def test_the_token_is_stored_only_as_its_hash(cast):
    ws, token = _running(cast)
    agent = WorkspaceAgent.objects.get(pk=ws.pk)
    stored = " ".join(str(v) for v in agent.__dict__.values())
    assert token.startswith("wsa_") and token not in stored


def test_a_token_works_only_for_its_own_workspace(client, cast):
    ws, _ = _running(cast)
    other, other_token = _running(cast)
    answer = post(client, ws, other_token, {"samples": [sample()]})
    assert answer.status_code == 401 and "error" in answer.json()
    assert not TelemetrySample.objects.exists()


@pytest.mark.parametrize("header", ["", "Bearer", "Basic abc", "Bearer wsa_wrong"])
def test_without_the_right_token_it_is_401(client, cast, header):
    ws, _ = _running(cast)
    answer = client.post(
        reverse("agent-heartbeat", args=[ws.pk]),
        json.dumps({"samples": [sample()]}),
        content_type="application/json",
        headers={"Authorization": header} if header else {},
    )
    assert answer.status_code == 401 and answer.json()["error"]


def test_delete_revokes_the_token(client, cast, sim):
    ws, token = _running(cast)
    workspace_delete(user=cast.researcher, workspace=ws, now=timezone.now())
    answer = post(client, ws, token, {"samples": [sample()]})
    assert answer.status_code == 410
    assert answer.json() == {"error": "The workspace is deleted; stop sending."}


def test_a_retry_gives_the_new_vm_a_new_token_and_refuses_the_old(client, cast, sim):
    ws, old = _running(cast)
    ws.status = Status.FAILED
    ws.save()
    workspace_retry(user=cast.researcher, workspace=ws, now=timezone.now())
    assert post(client, ws, old, {"samples": [sample()]}).status_code == 401


@pytest.mark.parametrize(
    "body,message",
    [
        (b"not json", "The body is not JSON."),
        ({"samples": []}, "'samples' must be a non-empty list."),
        ({"samples": [sample()] * 121}, "At most 120 samples per heartbeat."),
        ({"samples": [sample(util=150)]}, "util_percent must be a number from 0 to 100."),
        ({"samples": [sample(ssh=-1)]}, "ssh_sessions must be a whole number from 0 to 10000."),
        ({"samples": [sample(at="yesterday")]}, "at must be an ISO 8601 time."),
        ({"samples": [sample(at="2026-11-20T13:00:00")]}, "must carry its UTC offset"),
        ({"samples": [sample(gpus="many")]}, "gpus must be a list of at most 64."),
        ({"samples": [sample(cpu_percent="high")]}, "cpu_percent must be a number from 0 to 100"),
        (b"x" * (256 * 1024 + 1), "The body must be at most 262144 bytes."),
    ],
)
def test_bad_payloads_get_a_400_with_json_and_are_never_stored(client, cast, body, message):
    ws, token = _running(cast)
    answer = post(client, ws, token, body)
    assert answer.status_code == 400
    assert message in answer.json()["error"]
    assert not TelemetrySample.objects.exists()
    assert WorkspaceAgent.objects.get(pk=ws.pk).last_at is None


def test_a_machine_without_nvml_is_accepted_and_says_so(client, cast):
    ws, token = _running(cast)
    no_gpu = sample(nvml="unavailable: NVML Shared Library Not Found", gpus=[])
    assert post(client, ws, token, {"samples": [no_gpu]}).status_code == 202
    agent = WorkspaceAgent.objects.get(pk=ws.pk)
    assert agent.nvml.startswith("unavailable") and agent.gpus == []
    assert TelemetrySample.objects.get(workspace=ws).gpu_util is None


def test_samples_far_in_the_future_are_not_taken(client, cast):
    ws, token = _running(cast)
    future = sample(timezone.now() + timedelta(hours=2))
    assert post(client, ws, token, {"samples": [future]}).json()["accepted"] == 0


def test_old_samples_are_folded_into_hours_and_raw_ones_kept_48_hours(cast):
    ws, _ = _running(cast)
    now = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
    two_days_ago_10h = now - timedelta(hours=50)
    old = [two_days_ago_10h + timedelta(minutes=m) for m in range(0, 60, 10)]
    recent = [now - timedelta(hours=1)]
    TelemetrySample.objects.bulk_create(
        [
            TelemetrySample(workspace=ws, at=t, gpu_util=10 * i, interactive=0)
            for i, t in enumerate(old)
        ]
        + [TelemetrySample(workspace=ws, at=t, gpu_util=99) for t in recent]
    )
    assert telemetry.telemetry_downsample(now=now) == 6
    assert telemetry.telemetry_downsample(now=now) == 0  # idempotent
    hour = ws.telemetryhour_set.get(hour=two_days_ago_10h)
    assert (hour.samples, hour.gpu_util_max, hour.gpu_util_avg) == (6, 50, 25)
    assert list(TelemetrySample.objects.values_list("gpu_util", flat=True)) == [99]
    # The last complete hour is folded early for right-sizing, its sample kept.
    early = ws.telemetryhour_set.get(hour=now - timedelta(hours=1))
    assert (early.samples, early.gpu_util_max) == (1, 99)


def _gpu(**over):
    return {
        "index": 0,
        "name": "NVIDIA A100 80GB PCIe",
        "util_percent": 82,
        "mem_used_mib": 1,
        "mem_total_mib": 2,
        "processes": 1,
        "mig_profile": None,
        **over,
    }


@pytest.mark.parametrize(
    "doc,message",
    [
        # What PostgreSQL refuses to store: NUL in text, \u0000 in jsonb, lone surrogates.
        ({"samples": [sample(nvml="550\u0000")]}, "samples[0].nvml must be printable text"),
        ({"samples": [sample(gpus=[_gpu(name="A100\u0000")])]}, "gpus[0].name must be printable"),
        ({"samples": [sample(gpus=[_gpu(name="\ud800")])]}, "gpus[0].name must be printable"),
        ({"samples": [sample(nvml="ok\x1b[31m")]}, "samples[0].nvml must be printable text"),
        ({"samples": [sample(nvml="error: a\nb")]}, "samples[0].nvml must be printable text"),
        ({"samples": [sample(gpus=[_gpu(mig_profile="1g.10gb\t")])]}, "mig_profile must be"),
        ({"samples": [sample(gpus=[_gpu(name=7)])]}, "gpus[0].name must be printable text"),
        ({"samples": [sample(gpus=[_gpu(name=["A100"])])]}, "gpus[0].name must be printable"),
        ({"samples": [sample(gpus=[_gpu(name="x" * 65)])]}, "at most 64 characters"),
        ({"agent_version": "1.0\u0000", "samples": [sample()]}, "agent_version must be"),
    ],
)
def test_text_must_be_printable_and_bounded_or_it_is_a_400(client, cast, doc, message):
    ws, token = _running(cast)
    answer = post(client, ws, token, doc)
    assert answer.status_code == 400
    assert message in answer.json()["error"]
    assert not TelemetrySample.objects.exists()
    assert WorkspaceAgent.objects.get(pk=ws.pk).nvml == ""


NAN_IN_AN_IGNORED_FIELD = json.dumps({"samples": [sample()]}).replace(
    '"processes": 2', '"processes": NaN'
)


@pytest.mark.parametrize(
    "body,message",
    [
        ({"samples": [sample(at="0001-01-01T00:00:00+05:00")]}, "samples[0].at must lie between"),
        ({"samples": [sample(at="9999-12-31T23:59:59-05:00")]}, "samples[0].at must lie between"),
        ({"samples": [sample(at="1970-01-01T00:00:00Z")]}, "samples[0].at must lie between"),
        (b"[" * 100_000, "The body is not JSON"),
        (NAN_IN_AN_IGNORED_FIELD.encode(), "NaN and Infinity are not JSON"),
        (b'{"samples": [], "x": Infinity}', "NaN and Infinity are not JSON"),
    ],
)
def test_out_of_range_input_is_a_400_not_a_500(client, cast, body, message):
    ws, token = _running(cast)
    answer = post(client, ws, token, body)
    assert answer.status_code == 400
    assert message in answer.json()["error"]
    assert not TelemetrySample.objects.exists()


def test_a_day_of_backlog_is_taken_and_older_samples_are_dropped(client, cast):
    ws, token = _running(cast)
    now = timezone.now()
    answer = post(
        client,
        ws,
        token,
        {"samples": [sample(now - timedelta(days=2)), sample(now - timedelta(hours=23))]},
    )
    assert answer.status_code == 202 and answer.json()["accepted"] == 1
    stored = TelemetrySample.objects.get(workspace=ws)
    assert abs(stored.at - (now - timedelta(hours=23))) < timedelta(seconds=1)
