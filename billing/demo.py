"""The demo's right-sizing (issue 29: `make run` showed no advice, Savings or *Resize to …*
without 24 hours of waiting). For a few demo workspaces of the NLP Group, requested as their
owners would (workspaces.requests, so the worker creates their VMs in the emulator), a week
of telemetry ending at ``now``: busy working hours, idle nights and weekends, and memory use
that makes each one a case of the rules (billing.rightsizing): two oversized, one at its
memory ceiling. Then the recommendations are refreshed at ``now``, as the daily beat would.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.contrib.auth import get_user_model

from billing.recommendations import recommendations_refresh
from teams.models import Team
from workspaces.backends.vm_request import workspace_request
from workspaces.models import SizeOffering, Workspace
from workspaces.states import Status
from workspaces.telemetry_seed import HourFigures, telemetry_hours_import

DAYS = 7
SAMPLES_PER_HOUR = 120  # an agent's heartbeat every 30 s
DEMO_TEAM = "NLP Group"
# A public key only (the demo never logs in to these VMs).
DEMO_SSH_KEY = (
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAILs3EclqMstRC/CMdpRQrjymddZg5G39MI9XldktN3D3 demo"
)
GIB = 1024  # MiB


@dataclass(frozen=True)
class DemoWorkspace:
    """A demo workspace: owner, name, VM size in eastus, the request key that makes seeding it
    again a no-op, and its use: the fullest GPU's busy-hour memory (MiB) and GPUs in use."""

    owner: str
    name: str
    vm_size: str
    request_key: uuid.UUID
    busy_mem_mib: int
    gpus_in_use: int


DEMO_WORKSPACES = (
    # 2 x A100 80 GB serving a 7B model from one GPU at 14 GiB: one GPU (or a MIG slice) holds it.
    DemoWorkspace(
        "nora", "llm-serve", "Standard_NC48ads_A100_v4",
        uuid.UUID("6a1f3c52-0d2e-4b7a-9c11-5e2f8a0b7d01"), 14 * GIB, 1,
    ),
    # A T4 notebook using 2 GiB: a fractional A10 (4 GiB) is cheaper.
    DemoWorkspace(
        "bob", "notebook", "Standard_NC4as_T4_v3",
        uuid.UUID("6a1f3c52-0d2e-4b7a-9c11-5e2f8a0b7d02"), 2 * GIB, 1,
    ),
    # QLoRA of a 70B model filling the A100's 80 GB to 79 GiB: at its memory ceiling.
    DemoWorkspace(
        "bob", "llama-70b-qlora", "Standard_NC24ads_A100_v4",
        uuid.UUID("6a1f3c52-0d2e-4b7a-9c11-5e2f8a0b7d03"), 79 * GIB, 1,
    ),
)  # fmt: skip


def demo_week(demo: DemoWorkspace, memory_mib: int, *, now: datetime) -> list[HourFigures]:
    """The DAYS x 24 hours before ``now``'s hour: busy 09:00-19:00 UTC on weekdays (GPU 60-90 %,
    someone logged in until 17:00, a job running unattended after), idle otherwise (the model
    stays loaded: a third of the busy memory)."""
    end = now.replace(minute=0, second=0, microsecond=0)
    hours = []
    for back in range(DAYS * 24, 0, -1):
        hour = end - timedelta(hours=back)
        busy = hour.weekday() < 5 and 9 <= hour.hour < 19
        util = 60 + (hour.hour * 7 + hour.day * 3) % 31 if busy else 1
        mem = demo.busy_mem_mib if busy else demo.busy_mem_mib // 3
        hours.append(
            HourFigures(
                hour=hour,
                samples=SAMPLES_PER_HOUR,
                util_avg=util - 10 if busy else 0,
                util_max=util,
                interactive_max=1 if busy and hour.hour < 17 else 0,
                mem_max=min(mem, memory_mib),
                mem_sum=min(mem, memory_mib),
                mem_total=memory_mib,
                gpus_in_use=demo.gpus_in_use,
            )
        )
    return hours


def demo_telemetry_seed(*, now: datetime) -> list[Workspace]:
    """Request the demo workspaces (once: their request keys), give each the week before
    ``now`` of telemetry, and refresh the recommendations at ``now``. The workspaces, in
    DEMO_WORKSPACES' order; those whose team, owner or size is missing are skipped."""
    users = get_user_model().objects
    team = Team.objects.filter(name=DEMO_TEAM).first()
    seeded = []
    for demo in DEMO_WORKSPACES:
        owner = users.filter(username=demo.owner).first()
        offering = SizeOffering.objects.filter(
            vm_size=demo.vm_size, region="eastus", offered=True
        ).first()
        if team is None or owner is None or offering is None:
            continue
        workspace = workspace_request(
            user=owner,
            team=team,
            name=demo.name,
            offering=offering,
            ssh_public_key=DEMO_SSH_KEY,
            request_key=demo.request_key,
            now=now,
            justification="Demo workspace with a week of telemetry (make run).",
        )
        if workspace.status == Status.DELETED:
            continue
        memory = offering.gpu_memory_gib * GIB
        telemetry_hours_import(workspace_id=workspace.pk, hours=demo_week(demo, memory, now=now))
        seeded.append(workspace)
    recommendations_refresh(now=now)
    return seeded
