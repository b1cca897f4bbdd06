"""The VM's telemetry agent, played by a test where no live portal receives the emulator's
heartbeats (eager Celery): it reports what the agent would once the workspace's environment is
set up, through the portal's heartbeat service, and the worker's next look moves it on."""

import json
from datetime import UTC, datetime, timedelta

from django.conf import settings

from workspaces import telemetry
from workspaces.heartbeats import heartbeat_ingest
from workspaces.operations import workspace_advance


def agent_reports_ready(workspace_id, *, now: datetime, clock) -> None:
    """The agent of a setting-up VM says: driver loaded, layer done, JupyterLab answers; then
    the worker looks again (``clock``: what workspace_advance reads the time from)."""
    token = telemetry.agent_token_issue(workspace_id=workspace_id, now=now)
    # An interval after ``now``: the portal keeps one sample per half interval, and the
    # emulator's own agent may have reported an earlier step just now (live_server tests).
    at = now + timedelta(seconds=settings.AGENT_INTERVAL_SECONDS)
    sample = {
        "at": at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "nvml": "ok",
        "driver": "loaded",
        "gpus": [],
        "ssh_sessions": 0,
        "jupyter_busy_kernels": 0,
        "setup": {"step": "done", "state": "succeeded"},
        "jupyter_ready": True,
    }
    body = json.dumps({"samples": [sample]}).encode()
    heartbeat_ingest(workspace_id=workspace_id, token=token, body=body, now=now)
    workspace_advance(workspace_id=workspace_id, clock=clock)
