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
