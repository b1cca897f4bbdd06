"""The portal keeps what the agent says of the NVIDIA driver and the environment setup, and
the workspace page tells a driverless VM from an idle one (docs/agent-protocol.md)."""

import pytest
from django.utils import timezone

from tests.workspaces.test_heartbeat import _running, post, sample
from workspaces.models import WorkspaceAgent

pytestmark = pytest.mark.django_db


def test_a_missing_driver_and_the_setup_step_are_kept_and_shown(client, cast):
    ws, token = _running(cast)
    reading = sample(
        timezone.now(),
        util=0,
        ssh=0,
        nvml="unavailable: NVML Shared Library Not Found",
        gpus=[],
        driver="missing",
        setup={"step": "pip", "state": "running"},
    )
    assert post(client, ws, token, {"samples": [reading]}).status_code == 202
    agent = WorkspaceAgent.objects.get(pk=ws.pk)
    assert (agent.driver, agent.setup) == ("missing", "pip: running")
    client.force_login(cast.researcher)
    page = client.get(f"/workspaces/{ws.pk}/").content.decode()
    assert "No NVIDIA driver yet" in page and "Environment setup: pip: running." in page


@pytest.mark.parametrize(
    ("driver", "setup", "kept"),
    [
        ("loaded", None, ("loaded", "")),
        ("sideways", {"step": "pip", "state": "dreaming"}, ("", "")),  # newer words: unknown
        (None, {"step": "x" * 33, "state": "running"}, ("", "")),
    ],
)
def test_words_this_portal_does_not_know_are_kept_as_unknown(client, cast, driver, setup, kept):
    ws, token = _running(cast)
    extra = {k: v for k, v in (("driver", driver), ("setup", setup)) if v is not None}
    assert (
        post(client, ws, token, {"samples": [sample(timezone.now(), **extra)]}).status_code == 202
    )
    agent = WorkspaceAgent.objects.get(pk=ws.pk)
    assert (agent.driver, agent.setup) == kept


def test_a_failed_steps_log_tail_and_jupyters_answer_are_kept_bounded(client, cast):
    ws, token = _running(cast)
    hostile = ["ok"] * 500 + [42, None, "bell\x07" + "x" * 1000]
    reading = sample(
        timezone.now(),
        setup={"step": "pip", "state": "failed", "log_tail": hostile},
        jupyter_ready=False,
    )
    assert post(client, ws, token, {"samples": [reading]}).status_code == 202
    agent = WorkspaceAgent.objects.get(pk=ws.pk)
    assert (agent.setup, agent.jupyter) == ("pip: failed", "silent")
    assert len(agent.setup_log) == 18  # the last 20 entries, less the two that are not text
    assert agent.setup_log[-1].startswith("bell?x") and len(agent.setup_log[-1]) == 200


@pytest.mark.parametrize("tail", ["not a list", {"a": 1}, None])
def test_a_log_tail_of_another_shape_is_dropped_not_refused(client, cast, tail):
    ws, token = _running(cast)
    reading = sample(timezone.now(), setup={"step": "pip", "state": "failed", "log_tail": tail})
    assert post(client, ws, token, {"samples": [reading]}).status_code == 202
    assert WorkspaceAgent.objects.get(pk=ws.pk).setup_log == []
