"""GPU readings the portal takes itself for workspaces whose agent cannot read their GPU use.

NVML has no utilisation counter per MIG device, so a MIG slice's agent reports its memory and
Jupyter kernels but no GPU use (docs/agent-protocol.md). With PROMETHEUS_URL set, the MIG
backend reads DCGM's use of each running slice's MIG instance every scan (clusters.dcgm,
workspaces.kube_activity) and records it here (gpu_readings_record). Storing heartbeats
(workspaces.heartbeats) merges the latest reading into the agent's samples taken near it
(gpu_readings_merge), so the one stream of samples the idle policy folds carries both: the
agent's sessions and memory, and DCGM's GPU use. Two streams of samples would not do: the
portal keeps one sample per half agent interval, so one stream would drop the other's.

Readings live in Django's cache (Redis in production, shared by workers and web), a few
minutes: a reading lost, stale or never taken is no evidence, and the agent's samples count
as they came (the fallback without DCGM).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.cache import cache

from workspaces.telemetry import ParsedSample

Batch = list[tuple[Any, list[ParsedSample]]]  # [(workspace id, [sample])], as heartbeats'

logger = logging.getLogger(__name__)

KEY = "gpu-readings"  # One key for all: one cache read per batch of heartbeats, not one each.
READINGS_TTL_SECONDS = 600  # Longer than any scan interval; staleness is judged by ``at``.


@dataclass(frozen=True)
class GpuReading:
    """One reading of a workspace's GPU use at ``at`` (UTC-aware): ``gpu_util`` percent
    (0-100), ``fb_used_mib`` MiB of GPU memory in use."""

    at: datetime
    gpu_util: int
    fb_used_mib: int


def gpu_readings_record(*, readings: dict[Any, GpuReading]) -> None:
    """Keep ``readings`` ({workspace id: GpuReading}, every workspace the scan read) for
    gpu_readings_merge, in place of the previous scan's. Never raises: a cache that fails is
    logged, and the agents' samples then count alone."""
    value = {str(pk): (r.at, r.gpu_util, r.fb_used_mib) for pk, r in readings.items()}
    try:
        cache.set(KEY, value, READINGS_TTL_SECONDS)
    except Exception:
        logger.exception("Keeping %d GPU readings in the cache failed.", len(value))


def gpu_readings_merge(*, batch: Batch) -> Batch:
    """``batch`` ([(workspace id, [ParsedSample])]) with each sample taken within two agent
    intervals of its workspace's latest reading made to carry it: GPU use the higher of the
    two (the reading's where the agent had none), memory the agent's unless it read none.
    One cache read per batch, none when PROMETHEUS_URL is unset. Never raises: a cache that
    fails gives the batch unchanged."""
    if not settings.PROMETHEUS_URL or not batch:
        return batch
    try:
        found = cache.get(KEY)
    except Exception:
        logger.exception("Reading GPU readings from the cache failed; agents' samples alone.")
        return batch
    if not isinstance(found, dict) or not found:
        return batch
    window = timedelta(seconds=2 * settings.AGENT_INTERVAL_SECONDS)
    merged = []
    for pk, samples in batch:
        reading = _reading(found.get(str(pk)))
        if reading is not None:
            samples = [_merged(s, reading) if abs(s.at - reading.at) <= window else s
                       for s in samples]  # fmt: skip
        merged.append((pk, samples))
    return merged


def _reading(value: object) -> GpuReading | None:
    """The cached value as a GpuReading; None for anything else (none, an older shape)."""
    if not isinstance(value, tuple) or len(value) != 3:
        return None
    at, util, fb = value
    if not isinstance(at, datetime) or not isinstance(util, int) or not isinstance(fb, int):
        return None
    return GpuReading(at=at, gpu_util=util, fb_used_mib=fb)


def _merged(sample: ParsedSample, reading: GpuReading) -> ParsedSample:
    util = reading.gpu_util if sample.gpu_util is None else max(sample.gpu_util, reading.gpu_util)
    return replace(
        sample, gpu_util=util, gpu_mem_used_mib=sample.gpu_mem_used_mib or reading.fb_used_mib
    )
