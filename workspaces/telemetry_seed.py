"""Hours of telemetry written as TelemetryHour rows without heartbeats: the demo's week of
history (billing.demo), so right-sizing has something to measure the moment `make run` is up.
Production telemetry only comes from agents (workspaces.heartbeats, then
telemetry_downsample)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from workspaces.models import TelemetryHour


@dataclass(frozen=True)
class HourFigures:
    """One hour's figures, as TelemetryHour keeps them: ``hour`` aware UTC on the hour; percent
    and MiB (``mem_max`` the fullest GPU's, ``mem_sum`` all GPUs', ``mem_total`` per GPU)."""

    hour: datetime
    samples: int
    util_avg: int
    util_max: int
    interactive_max: int
    mem_max: int
    mem_sum: int
    mem_total: int
    gpus_in_use: int


def telemetry_hours_import(*, workspace_id: UUID | str, hours: list[HourFigures]) -> int:
    """Insert ``hours`` for the workspace, leaving hours it already has as they are
    (idempotent); returns how many were given. One INSERT per 500 hours."""
    TelemetryHour.objects.bulk_create(
        [
            TelemetryHour(
                workspace_id=workspace_id,
                hour=h.hour,
                samples=h.samples,
                gpu_util_avg=h.util_avg,
                gpu_util_max=h.util_max,
                interactive_max=h.interactive_max,
                gpu_mem_max_mib=h.mem_max,
                gpu_mem_sum_mib=h.mem_sum,
                gpu_mem_total_mib=h.mem_total,
                gpus_in_use_max=h.gpus_in_use,
            )
            for h in hours
        ],
        batch_size=500,
        ignore_conflicts=True,
    )
    return len(hours)
