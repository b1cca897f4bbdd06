"""The idle policy: pure functions of telemetry, a policy and the time. No ORM, no clock.

Telemetry is folded sample by sample into an ``Activity`` (what the sweep stores per workspace,
so it never re-reads samples), and ``verdict`` turns an Activity into a ``Verdict``: whether the
workspace is active, idle or silent, since when, and when it is warned and stopped.
``evaluate(samples, policy, now)`` does both at once.

Rules, in words:
- A sample is *busy* when its highest GPU utilisation is at least ``gpu_threshold`` percent. A
  busy run counts as work once it has lasted ``spike_seconds``; a shorter one is a spike and
  is ignored. An interactive session (a busy Jupyter kernel; an open SSH login only from
  agents before 1.2, whose logins count by their last keystroke instead) counts at once.
- Work in an IDE counts from when it happened (``user_active_at``: a kernel's last message, a
  terminal's last input, a save; docs/agent-protocol.md, "IDE activity"), so a notebook whose
  cells ran 10 minutes ago is idle for 10 minutes, not for as long as its tab stays open.
- Idleness needs evidence: a silence longer than ``gap_seconds`` between samples restarts it,
  so a workspace is never stopped for idleness over a stretch nobody saw.
- With no sample for ``gap_seconds`` the agent is *silent*: the workspace shows "no telemetry"
  and stops ``silent_minutes`` after its last sample (or its start). When the portal itself
  failed to store telemetry after that sample (``unstored_at``), the silence may be the
  portal's: it is counted from the failure, and nobody is told of it while the failure is
  less than ``gap_seconds`` old.
- The nightly stop (``nightly_stop`` in the team's ``timezone``) and the maximum lifetime stop a
  workspace however busy it is. A *keep running* extension delays every stop but the lifetime.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, replace
from datetime import datetime, time, timedelta
from enum import StrEnum
from typing import Any
from zoneinfo import ZoneInfo


@dataclass(frozen=True)
class Sample:
    """One heartbeat sample: ``gpu_util`` is the highest GPU utilisation (percent), None when
    the agent could not read NVML; ``interactive`` counts SSH sessions and busy kernels;
    ``user_active_at`` is the user's last work in an IDE or terminal that the agent saw (None:
    none seen, or an agent before 1.1)."""

    at: datetime
    gpu_util: int | None
    interactive: int = 0
    user_active_at: datetime | None = None


@dataclass(frozen=True)
class Policy:
    """A team's idle policy. Minutes, seconds and hours as named; ``nightly_stop`` a local
    time of day in ``timezone`` (an IANA name), or None."""

    gpu_threshold: int = 5
    idle_minutes: float = 30
    warn_minutes: float = 10
    spike_seconds: float = 60
    gap_seconds: float = 180
    silent_minutes: float = 60
    nightly_stop: time | None = None
    timezone: str = "UTC"
    max_lifetime_hours: float | None = None


@dataclass(frozen=True)
class Activity:
    """What the samples so far say: the last sample, the start of the current gap-free run
    (``evidence_since``), the start of the current busy run, and the last counted work."""

    last_at: datetime | None = None
    evidence_since: datetime | None = None
    busy_since: datetime | None = None
    active_at: datetime | None = None


def activity_of(row: Mapping[str, Any]) -> Activity:
    """The Activity stored in ``row`` (a WorkspaceAgent's values, or its ``vars()``)."""
    return Activity(**{f.name: row[f.name] for f in fields(Activity)})


class State(StrEnum):
    ACTIVE = "active"
    IDLE = "idle"
    SILENT = "no_telemetry"


class StopReason(StrEnum):
    IDLE = "idle"
    SILENT = "silent"
    NIGHTLY = "nightly"
    LIFETIME = "lifetime"


@dataclass(frozen=True)
class Verdict:
    """``since``: last work (active), start of idleness (idle) or last sample (silent).
    ``stop_at`` is when the workspace is stopped, for ``stop_reason``; ``warn_at`` when its
    owner is warned. All times UTC-aware. ``portal_failing``: silent, but the portal failed
    to store telemetry within the last ``gap_seconds``, so the silence may be its own."""

    state: State
    since: datetime
    stop_at: datetime
    warn_at: datetime
    stop_reason: StopReason
    portal_failing: bool = False

    def should_stop(self, now: datetime) -> bool:
        return now >= self.stop_at

    def should_warn(self, now: datetime) -> bool:
        return self.warn_at <= now < self.stop_at


def fold(activity: Activity, samples: Iterable[Sample], policy: Policy) -> Activity:
    """``activity`` updated with ``samples`` (in time order; ones not newer than the last
    seen sample are ignored, so a re-sent batch changes nothing)."""
    for sample in samples:
        if activity.last_at is not None and sample.at <= activity.last_at:
            continue
        activity = _fold_one(activity, sample, policy)
    return activity


def _fold_one(activity: Activity, sample: Sample, policy: Policy) -> Activity:
    gap = timedelta(seconds=policy.gap_seconds)
    if activity.last_at is None or sample.at - activity.last_at > gap:
        # Unseen stretch: neither work nor idleness can be claimed for it.
        activity = replace(activity, evidence_since=sample.at, busy_since=None)
    busy = sample.gpu_util is not None and sample.gpu_util >= policy.gpu_threshold
    busy_since = (activity.busy_since or sample.at) if busy else None
    active_at = activity.active_at
    sustained = busy_since is not None and (
        sample.at - busy_since >= timedelta(seconds=policy.spike_seconds)
    )
    if sample.interactive > 0 or sustained:
        active_at = sample.at
    worked = sample.user_active_at
    if worked is not None:
        worked = min(worked, sample.at)  # work is never later than the sample saying so
        active_at = worked if active_at is None else max(active_at, worked)
    return replace(activity, last_at=sample.at, busy_since=busy_since, active_at=active_at)


def verdict(
    activity: Activity,
    policy: Policy,
    now: datetime,
    *,
    running_since: datetime,
    kept_until: datetime | None = None,
    unstored_at: datetime | None = None,
) -> Verdict:
    """The verdict for a workspace running since ``running_since`` whose owner kept it running
    until ``kept_until`` (or never), and whose telemetry the portal last failed to store at
    ``unstored_at`` (or never)."""
    state, since, stop_at, reason = _base(activity, policy, now, running_since)
    failing = False
    if state is State.SILENT and unstored_at is not None and unstored_at > since:
        # Heartbeats after ``since`` may have reached a portal that could not store them.
        stop_at = max(stop_at, unstored_at + timedelta(minutes=policy.silent_minutes))
        failing = now - unstored_at <= timedelta(seconds=policy.gap_seconds)
    nightly = next_nightly_stop(policy, after=running_since)
    if nightly is not None and nightly < stop_at:
        stop_at, reason = nightly, StopReason.NIGHTLY
    if kept_until is not None and kept_until > stop_at:
        stop_at = kept_until
    if policy.max_lifetime_hours is not None:
        end_of_life = running_since + timedelta(hours=policy.max_lifetime_hours)
        if end_of_life < stop_at:
            stop_at, reason = end_of_life, StopReason.LIFETIME
    warn_at = stop_at - timedelta(minutes=policy.warn_minutes)
    return Verdict(state, since, stop_at, warn_at, reason, failing)


def _base(
    activity: Activity, policy: Policy, now: datetime, running_since: datetime
) -> tuple[State, datetime, datetime, StopReason]:
    """(state, since, stop_at, reason) from the telemetry alone."""
    last = max(activity.last_at or running_since, running_since)
    if now - last > timedelta(seconds=policy.gap_seconds):
        return (
            State.SILENT,
            last,
            last + timedelta(minutes=policy.silent_minutes),
            StopReason.SILENT,
        )
    idle_since = max(
        t for t in (activity.active_at, activity.evidence_since, running_since) if t is not None
    )
    stop_at = idle_since + timedelta(minutes=policy.idle_minutes)
    if activity.active_at is not None and activity.active_at >= last:
        return State.ACTIVE, activity.active_at, stop_at, StopReason.IDLE
    return State.IDLE, idle_since, stop_at, StopReason.IDLE


def next_nightly_stop(policy: Policy, *, after: datetime) -> datetime | None:
    """The first ``nightly_stop`` (local time in the policy's time zone) strictly after
    ``after``, as UTC-aware datetime; None without a nightly stop."""
    if policy.nightly_stop is None:
        return None
    zone = ZoneInfo(policy.timezone)
    local = after.astimezone(zone)
    candidate = datetime.combine(local.date(), policy.nightly_stop, tzinfo=zone)
    if candidate <= local:
        candidate = datetime.combine(local.date() + timedelta(days=1), policy.nightly_stop, zone)
    return candidate.astimezone(after.tzinfo)


def evaluate(
    samples: Iterable[Sample],
    policy: Policy,
    now: datetime,
    *,
    running_since: datetime,
    kept_until: datetime | None = None,
) -> Verdict:
    """The verdict from the samples since the workspace started running."""
    activity = fold(Activity(), samples, policy)
    return verdict(activity, policy, now, running_since=running_since, kept_until=kept_until)
