"""What a workspace's page shows of its telemetry: the agent's latest reading, the idle
verdict, Keep running's extensions and a 24-hour sparkline (workspaces.selectors re-exports
workspace_telemetry)."""

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from common.words import duration_words
from teams.models import IdlePolicy
from workspaces import idle
from workspaces.backends import Words
from workspaces.heartbeats import telemetry_outage_last
from workspaces.models import TelemetrySample, Workspace, WorkspaceAgent, WorkspaceExtension
from workspaces.states import Status
from workspaces.telemetry import extension_minutes, policy_from_row


@dataclass(frozen=True)
class TelemetryView:
    """What a running workspace's page shows of its telemetry: the agent's latest reading
    (None before the first heartbeat), the idle verdict, the extensions, and a 24-hour
    sparkline of the highest GPU utilisation per 15 minutes (percent, None where unseen)."""

    agent: WorkspaceAgent | None
    verdict: idle.Verdict | None  # None when not running
    policy: idle.Policy
    extensions: list[WorkspaceExtension]
    sparkline: list[int | None]
    extensions_left: int

    now: datetime
    extension_hours: int
    unstored_at: datetime | None = None  # the portal last failed to store its telemetry
    words: Words | None = None  # its kind's words (workspaces.backends.base.Words)

    @property
    def has_readings(self) -> bool:
        """Whether the 24-hour sparkline has any reading to draw (else the page says so
        instead of showing an empty box)."""
        return any(point is not None for point in self.sparkline)

    @property
    def idle_words(self) -> str:
        """What idle means for its kind, in words: "GPU under 5%, no SSH or Jupyter
        activity"; where no GPU utilisation is measured (a MIG slice without DCGM), the
        kind's words for that instead of a threshold nothing was compared with."""
        if self.words is None:
            return ""
        if self.top_util is None:
            return self.words.idle_unmeasured
        return self.words.idle_when.format(threshold=self.policy.gpu_threshold)

    @property
    def portal_failed_at(self) -> datetime | None:
        """When the portal failed to store telemetry during this silence, if it did: the
        silence counts from then (workspaces.idle.verdict)."""
        v, at = self.verdict, self.unstored_at
        if v is None or v.state != "no_telemetry" or at is None:
            return None
        return at if at > v.since else None

    @property
    def extension_words(self) -> str:
        """How long Keep running keeps it, in words, as long as the deadline it sets
        (scaled by IDLE_TIME_SCALE in demos): "4 hours", "24 minutes"."""
        return duration_words(extension_minutes(self.extension_hours))

    @property
    def warned(self) -> bool:
        return self.verdict is not None and self.verdict.should_warn(self.now)

    @property
    def top_util(self) -> int | None:
        utils = [
            g["util"] for g in (self.agent.gpus if self.agent else []) if g["util"] is not None
        ]
        return max(utils) if utils else None


SPARK_BUCKET_MINUTES = 15


def workspace_telemetry(*, workspace: Workspace, now: datetime) -> TelemetryView:
    """The telemetry of one workspace for its page: five queries and, while it runs, a cache
    read (when the portal last failed to store telemetry)."""

    agent = WorkspaceAgent.objects.filter(pk=workspace.pk).first()
    row = IdlePolicy.objects.filter(team_id=workspace.team_id).first() or IdlePolicy()
    policy = policy_from_row(row)
    verdict = unstored_at = None
    if agent is not None and workspace.status == Status.RUNNING:
        outage = telemetry_outage_last(now=now)
        unstored_at = max((t for t in (agent.store_failed_at, outage) if t), default=None)
        verdict = idle.verdict(
            idle.activity_of(vars(agent)),
            policy,
            now,
            running_since=workspace.status_changed_at,
            kept_until=agent.kept_until,
            unstored_at=unstored_at,
        )
    day_ago = now - timedelta(hours=24)
    extensions = list(workspace.extensions.select_related("user")[:10])
    used_today = sum(1 for e in extensions if e.at > day_ago)
    points = TelemetrySample.objects.filter(workspace=workspace, at__gte=day_ago).values_list(
        "at", "gpu_util"
    )
    return TelemetryView(
        agent=agent,
        verdict=verdict,
        policy=policy,
        extensions=extensions,
        sparkline=_sparkline(points, day_ago),
        extensions_left=max(0, row.extensions_per_day - used_today),
        now=now,
        extension_hours=row.extension_hours,
        unstored_at=unstored_at,
        words=workspace.backend.words,
    )


def _sparkline(points: Iterable[tuple[datetime, int | None]], start: datetime) -> list[int | None]:
    buckets: list[int | None] = [None] * (24 * 60 // SPARK_BUCKET_MINUTES)
    for at, util in points:
        i = min(len(buckets) - 1, int((at - start).total_seconds() // (SPARK_BUCKET_MINUTES * 60)))
        if util is not None and i >= 0:
            buckets[i] = max(util, buckets[i] or 0)
    return buckets
