"""Services for the telemetry agent: its token, heartbeat ingestion, and the folding of
samples into each workspace's ``Activity`` (workspaces.idle). The protocol is
docs/agent-protocol.md.

A token is ``wsa_`` + HMAC-SHA256(SECRET_KEY, workspace id and generation), so the portal can
put the same token into a VM create that is sent again (Azure refuses a changed customData) and
still stores only its SHA-256. A new generation (a VM created anew) replaces it; deleting the
workspace revokes it. Rotating SECRET_KEY invalidates the agents' tokens.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, NoReturn
from uuid import UUID

from django.conf import settings
from django.db import transaction
from django.db.models import Avg, Count, Max, Q
from django.db.models.functions import TruncHour

from common.words import duration_words
from teams.models import IdlePolicy
from workspaces import idle
from workspaces.ide_activity import ide_activity, ide_busy_kernels, ssh_counts_open
from workspaces.models import HOUR_FIGURES, TelemetryHour, TelemetrySample, WorkspaceAgent
from workspaces.states import Status

MAX_BODY_BYTES = 256 * 1024
MAX_SAMPLES = 120
MAX_GPUS = 64
MAX_GPU_NAME = 64  # characters of a GPU's name or MIG profile
# A GPU holding less than this is not in use: a CUDA context alone takes a few hundred MiB.
GPU_IN_USE_MIB = 1024
# Sample times outside these are no clock's reading; times inside but too old or too far ahead
# for the idle policy are dropped by workspaces.heartbeats, not refused.
EARLIEST = datetime(2000, 1, 1, tzinfo=UTC)
LATEST = datetime(2100, 1, 1, tzinfo=UTC)
GONE = frozenset({Status.DELETING, Status.DELETED})


class HeartbeatRefused(Exception):
    """A heartbeat the portal does not take: ``status`` 400 (bad payload), 401 (bad token),
    410 (workspace deleted, token revoked), 429 (too many: retry after ``retry_after``
    seconds) or 503 (busy: retry after ``retry_after`` seconds); the message says why."""

    def __init__(self, status: int, message: str, retry_after: int | None = None):
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after
        self.message = message


def _token(workspace_id: UUID, generation: int) -> str:
    mac = hmac.new(
        settings.SECRET_KEY.encode(), f"agent:{workspace_id}:{generation}".encode(), "sha256"
    )
    return "wsa_" + base64.urlsafe_b64encode(mac.digest()).decode().rstrip("=")


def _sha256(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def agent_token_issue(*, workspace_id: UUID, now: datetime, new_vm: bool = False) -> str:
    """The agent token to put into the workspace's VM (its custom_data). ``new_vm`` starts a
    new generation, invalidating the previous VM's token and forgetting its telemetry."""
    agent, created = WorkspaceAgent.objects.get_or_create(
        workspace_id=workspace_id,
        defaults={"token_sha256": _sha256(_token(workspace_id, 1)), "token_created_at": now},
    )
    if new_vm and not created:
        _forget_token(workspace_id)
        generation = agent.token_generation + 1
        WorkspaceAgent.objects.filter(pk=workspace_id).update(
            token_generation=generation,
            token_sha256=_sha256(_token(workspace_id, generation)),
            token_created_at=now,
            revoked_at=None,
            **_FORGET,
        )
        return _token(workspace_id, generation)
    return _token(workspace_id, agent.token_generation)


_FORGET: dict[str, Any] = {
    "last_at": None,
    "evidence_since": None,
    "busy_since": None,
    "active_at": None,
    "warned_stop_at": None,
    "silent_told_since": None,
    "kept_until": None,
    "store_failed_at": None,
    # What the agent said of the driver and setup belongs to the VM it ran on.
    "driver": "",
    "setup": "",
    "setup_log": [],
    "jupyter": "",
}


def agent_token_revoke(*, workspace_id: UUID, now: datetime) -> None:
    """Refuse the workspace's agent from now on (410 Gone)."""
    WorkspaceAgent.objects.filter(pk=workspace_id, revoked_at=None).update(revoked_at=now)
    _forget_token(workspace_id)


def _forget_token(workspace_id: UUID) -> None:
    from workspaces.heartbeats import heartbeat_forget_token  # it imports this module

    heartbeat_forget_token(workspace_id=workspace_id)


def agent_activity_reset(*, workspace_id: UUID) -> None:
    """Forget telemetry folded before a stop, so a started VM is judged on fresh samples."""
    WorkspaceAgent.objects.filter(pk=workspace_id).update(**_FORGET)


@dataclass(frozen=True)
class ParsedSample:
    """One validated sample: percent, MiB; ``gpus`` as shown on the workspace page.
    ``gpu_mem_used_mib`` is summed over the GPUs (or MIG devices); ``gpu_mem_max_mib`` is the
    fullest single GPU's use and ``gpu_mem_total_mib`` the largest GPU's memory, what
    right-sizing compares a size's memory per GPU with; ``gpus_in_use`` counts the GPUs
    holding at least GPU_IN_USE_MIB."""

    at: datetime
    nvml: str
    gpus: list[dict[str, Any]]  # name, util, mem_used, mem_total (_gpu)
    gpu_util: int | None
    gpu_mem_used_mib: int
    interactive: int
    cpu_percent: int | None
    gpu_mem_max_mib: int = 0
    gpu_mem_total_mib: int = 0
    gpus_in_use: int = 0
    driver: str = ""  # "loaded", "missing", or "" (an agent that does not say)
    setup: str = ""  # the environment setup's "step: state", "" when none
    setup_log: tuple[str, ...] = ()  # the setup log's last lines, when a step failed
    jupyter: str = ""  # "answers" / "silent": JupyterLab on the private address; "" unknown
    # The user's last work in an IDE or terminal that an open tab does not fake (ide_activity).
    user_active_at: datetime | None = None


def heartbeat_parse(body: bytes) -> list[ParsedSample]:
    """The samples of a heartbeat body, oldest first. Raises HeartbeatRefused(400) for
    anything the protocol does not allow, saying what: every text printable and bounded,
    every number finite and in its range, every time between EARLIEST and LATEST."""
    if len(body) > MAX_BODY_BYTES:
        raise HeartbeatRefused(400, f"The body is over {MAX_BODY_BYTES} bytes.")
    doc = _json(body)
    samples = doc.get("samples") if isinstance(doc, dict) else None
    if not isinstance(samples, list) or not samples:
        raise HeartbeatRefused(400, "'samples' must be a non-empty list.")
    if len(samples) > MAX_SAMPLES:
        raise HeartbeatRefused(400, f"At most {MAX_SAMPLES} samples per heartbeat.")
    if "agent_version" in doc:
        _text(doc["agent_version"], "agent_version", 32)
    parsed = [_sample(i, s) for i, s in enumerate(samples)]
    return sorted(parsed, key=lambda s: s.at)


def _json(body: bytes | str) -> Any:  # what the JSON holds, checked by the caller
    try:
        # As json.loads(body) decodes, with a decoder made once: one per call costs 5 µs.
        if isinstance(body, bytes | bytearray):
            body = body.decode(json.detect_encoding(body), "surrogatepass")
        return _DECODER.decode(body)
    except _NotFinite:
        raise HeartbeatRefused(400, "NaN and Infinity are not JSON numbers.") from None
    # RecursionError: thousands of nested brackets; the C parser gives up before the stack does.
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise HeartbeatRefused(400, "The body is not JSON.") from None


class _NotFinite(Exception):
    pass


def _no_constant(name: str) -> NoReturn:
    # json.loads takes NaN, Infinity and -Infinity, which are not JSON and compare false
    # with every bound.
    raise _NotFinite(name)


_DECODER = json.JSONDecoder(parse_constant=_no_constant)


def _sample(index: int, raw: object) -> ParsedSample:
    where = f"samples[{index}]"
    if not isinstance(raw, dict):
        raise HeartbeatRefused(400, f"{where} must be an object.")
    gpus = raw.get("gpus")
    if not isinstance(gpus, list) or len(gpus) > MAX_GPUS:
        raise HeartbeatRefused(400, f"{where}.gpus must be a list of at most {MAX_GPUS}.")
    shown = [_gpu(f"{where}.gpus[{i}]", g) for i, g in enumerate(gpus)]
    utils = [g["util"] for g in shown if g["util"] is not None]
    nvml = _text(raw.get("nvml"), f"{where}.nvml", 200)
    ssh = _int(raw, "ssh_sessions", where, 0, 10_000)
    if not ssh_counts_open(raw):
        ssh = 0  # An agent 1.2 login counts by its last input (ide_activity), not for being open.
    kernels = max(_int(raw, "jupyter_busy_kernels", where, 0, 10_000), ide_busy_kernels(raw))
    cpu = raw.get("cpu_percent")
    if cpu is not None and not _number(cpu, 0, 100):
        raise HeartbeatRefused(400, f"{where}.cpu_percent must be a number from 0 to 100.")
    at = _when(raw.get("at"), where)
    return ParsedSample(
        at=at,
        nvml=nvml,
        gpus=shown,
        gpu_util=max(utils) if utils else None,
        gpu_mem_used_mib=sum(g["mem_used"] for g in shown),
        interactive=min(ssh + kernels, 32_767),
        cpu_percent=None if cpu is None else round(cpu),
        gpu_mem_max_mib=max((g["mem_used"] for g in shown), default=0),
        gpu_mem_total_mib=max((g["mem_total"] for g in shown), default=0),
        gpus_in_use=sum(1 for g in shown if g["mem_used"] >= GPU_IN_USE_MIB),
        driver=str(raw["driver"]) if raw.get("driver") in DRIVER_STATES else "",
        setup=_setup(raw.get("setup")),
        setup_log=_setup_log(raw.get("setup")),
        jupyter=_jupyter(raw.get("jupyter_ready")),
        user_active_at=ide_activity(raw, at),
    )


DRIVER_STATES = ("loaded", "missing")  # docs/agent-protocol.md; anything else is unknown
SETUP_STATES = ("running", "failed", "succeeded")


def _setup(raw: object) -> str:
    """The environment setup's step as "step: state" (docs/agent-protocol.md), "" when the
    sample has none or one this portal does not understand (newer agents may say more)."""
    if not isinstance(raw, dict) or raw.get("state") not in SETUP_STATES:
        return ""
    step = raw.get("step")
    if not isinstance(step, str) or not step.isprintable() or not 0 < len(step) <= 32:
        return ""
    return f"{step}: {raw['state']}"


MAX_LOG_LINES, MAX_LOG_LINE = 20, 200  # the setup log's tail: lines, characters per line


def _setup_log(raw: object) -> tuple[str, ...]:
    """The setup log's last lines (docs/agent-protocol.md, ``setup.log_tail``): at most
    MAX_LOG_LINES, each cut to MAX_LOG_LINE characters with what is not printable replaced.
    Shown to the workspace's owner, so a newer agent's other shapes are dropped, not refused."""
    tail = raw.get("log_tail") if isinstance(raw, dict) else None
    if not isinstance(tail, list):
        return ()
    lines = [line for line in tail[-MAX_LOG_LINES:] if isinstance(line, str)]
    return tuple(
        "".join(c if c.isprintable() else "?" for c in line[:MAX_LOG_LINE]) for line in lines
    )


def _jupyter(raw: object) -> str:
    """JupyterLab's answer to the agent: True "answers", False "silent", else unknown."""
    if raw is True:
        return "answers"
    return "silent" if raw is False else ""


def _gpu(where: str, raw: object) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise HeartbeatRefused(400, f"{where} must be an object.")
    util = raw.get("util_percent")
    if util is not None and not _number(util, 0, 100):
        raise HeartbeatRefused(400, f"{where}.util_percent must be a number from 0 to 100.")
    name, profile = raw.get("name"), raw.get("mig_profile")
    if name is not None:
        _text(name, f"{where}.name", MAX_GPU_NAME)
    if profile is not None:
        _text(profile, f"{where}.mig_profile", MAX_GPU_NAME)
    return {
        "name": profile or name or "GPU",
        "util": None if util is None else round(util),
        "mem_used": _int(raw, "mem_used_mib", where, 0, 10**7),
        "mem_total": _int(raw, "mem_total_mib", where, 0, 10**7),
    }


def _text(value: object, where: str, most: int) -> str:
    """``value`` if it is printable text of at most ``most`` characters; else a 400. What is
    not printable (control characters such as NUL, lone surrogates) PostgreSQL either refuses
    to store or shows nobody any good."""
    if not isinstance(value, str) or len(value) > most or not value.isprintable():
        raise HeartbeatRefused(400, f"{where} must be printable text of at most {most} characters.")
    return value


def _number(value: object, low: float, high: float) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and low <= value <= high


def _int(raw: dict[str, Any], key: str, where: str, low: int, high: int) -> int:
    value = raw.get(key, 0)
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise HeartbeatRefused(400, f"{where}.{key} must be a whole number from {low} to {high}.")
    return value


def _when(value: object, where: str) -> datetime:
    if not isinstance(value, str) or len(value) > 40:
        raise HeartbeatRefused(400, f"{where}.at must be an ISO 8601 time.")
    try:
        at = datetime.fromisoformat(value)
    except ValueError:
        raise HeartbeatRefused(400, f"{where}.at must be an ISO 8601 time.") from None
    if at.tzinfo is None:
        raise HeartbeatRefused(400, f"{where}.at must carry its UTC offset (e.g. Z).")
    utc: datetime | None
    try:
        utc = at.astimezone(UTC)  # year 1 or 9999 with an offset overflows
    except OverflowError:
        utc = None
    if utc is None or not EARLIEST <= utc < LATEST:
        raise HeartbeatRefused(
            400, f"{where}.at must lie between {EARLIEST:%Y-%m-%d} and {LATEST:%Y-%m-%d} (UTC)."
        )
    return utc


def policy_from_row(row: IdlePolicy) -> idle.Policy:
    """A team's IdlePolicy row as workspaces.idle takes it, every duration multiplied by
    IDLE_TIME_SCALE (1 in production; demos and tests shrink it)."""
    scale = settings.IDLE_TIME_SCALE
    return idle.Policy(
        gpu_threshold=row.gpu_threshold,
        idle_minutes=row.idle_minutes * scale,
        warn_minutes=row.warn_minutes * scale,
        spike_seconds=settings.IDLE_SPIKE_SECONDS * scale,
        gap_seconds=settings.IDLE_GAP_SECONDS * scale,
        silent_minutes=row.silent_minutes * scale,
        nightly_stop=row.nightly_stop,
        timezone=row.timezone,
        max_lifetime_hours=(
            None if row.max_lifetime_hours is None else row.max_lifetime_hours * scale
        ),
    )


# Hourly, the complete hours this far back are folded early too (their samples kept), so
# TelemetryHour is current to the last hour for right-sizing (billing.usage), which then reads
# no raw sample; 2 hours covers one missed run. Samples arriving later for an hour folded early
# (an agent's backlog) count once the hour is folded again at TELEMETRY_RAW_HOURS.
EARLY_FOLD_HOURS = 2


def telemetry_downsample(*, now: datetime) -> int:
    """Fold raw samples older than TELEMETRY_RAW_HOURS (whole hours, UTC) into one
    TelemetryHour per workspace and hour, then delete them; returns how many were folded.
    The complete hours of the last EARLY_FOLD_HOURS are folded too, their samples kept.
    Idempotent: an hour folded twice is replaced, not doubled. One pass over the samples."""
    this_hour = now.replace(minute=0, second=0, microsecond=0)
    cutoff = (now - timedelta(hours=settings.TELEMETRY_RAW_HOURS)).replace(
        minute=0, second=0, microsecond=0
    )
    early = Q(at__gte=this_hour - timedelta(hours=EARLY_FOLD_HOURS), at__lt=this_hour)
    old = TelemetrySample.objects.filter(at__lt=cutoff)
    rows = (
        TelemetrySample.objects.filter(Q(at__lt=cutoff) | early)
        .annotate(hour=TruncHour("at"))
        .values("workspace_id", "hour")
        .annotate(
            n=Count("id"),
            avg=Avg("gpu_util"),
            top=Max("gpu_util"),
            inter=Max("interactive"),
            mem_max=Max("gpu_mem_max_mib"),
            mem_sum=Max("gpu_mem_used_mib"),
            mem_total=Max("gpu_mem_total_mib"),
            in_use=Max("gpus_in_use"),
        )
    )
    hours = [
        TelemetryHour(
            workspace_id=r["workspace_id"],
            hour=r["hour"],
            samples=r["n"],
            gpu_util_avg=None if r["avg"] is None else round(r["avg"]),
            gpu_util_max=r["top"],
            interactive_max=r["inter"] or 0,
            gpu_mem_max_mib=r["mem_max"],
            gpu_mem_sum_mib=r["mem_sum"],
            gpu_mem_total_mib=r["mem_total"],
            gpus_in_use_max=r["in_use"],
        )
        for r in rows
    ]
    with transaction.atomic():
        TelemetryHour.objects.bulk_create(
            hours,
            update_conflicts=True,
            unique_fields=["workspace", "hour"],
            update_fields=list(HOUR_FIGURES),
        )
        folded, _ = old.delete()
    return folded


def extension_minutes(hours: int) -> float:
    """The real length of a Keep running extension of ``hours`` in the team's policy
    (minutes): scaled like every idle-policy duration (IDLE_TIME_SCALE), so the button's
    label and the deadline it sets agree."""
    return float(hours * 60 * settings.IDLE_TIME_SCALE)


def demo_timings_note() -> str:
    """A note for every page when idle-policy durations are scaled (IDLE_TIME_SCALE != 1,
    as `make run` does), with the default policy's real durations; "" in production."""
    scale = settings.IDLE_TIME_SCALE
    if scale == 1:
        return ""
    row = _default_policy()
    policy = policy_from_row(row)
    kept = duration_words(extension_minutes(row.extension_hours))
    return (
        f"Demo timings (×{scale:g}): an idle workspace is stopped after "
        f"{duration_words(policy.idle_minutes)}, warned {duration_words(policy.warn_minutes)} "
        f"before; Keep running keeps it {kept}. Every time shown is the real one."
    )


def _default_policy() -> IdlePolicy:
    return IdlePolicy()
