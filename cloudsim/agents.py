"""The emulator plays the telemetry agent (docs/agent-protocol.md) of every running VM and of
every running pod that runs one (a MIG workspace's).

AgentBook is the state: per-VM profiles and stats, set and shown by the /_sim/agents control
API. It lives on the Cloud (`cloud.agents`) and, like the rest of the Cloud, is guarded by
`cloud.lock`. AgentPlayer is the daemon thread that, every tick, picks the VMs whose agent is
due and builds their samples under the lock, then posts each one from its own short-lived
thread, outside the lock, so a slow or absent portal never holds up ARM requests or other VMs.

A VM plays its agent while its power state is "running" (PowerState/running) and its customData
holds an agent config. A pod plays it while its phase is Running and a container's environment
names the portal (GPU_PORTAL_URL, GPU_PORTAL_WORKSPACE, PORTAL_AGENT_TOKEN; cloudsim.kube.
pod_agents); it reports the pod's one MIG device. Agents are addressed by name, as the control
API addresses them: the VM's, or the pod's StatefulSet's ("ws-<12 hex>").
"""

import http.client
import json
import logging
import random
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from . import guest_setup
from .agent_protocol import (
    AGENT_VERSION,
    DEFAULT_SPIKE_EVERY,
    AgentConfig,
    GpuModel,
    agent_config,
    check_profile,
    gpu_model,
    make_sample,
)
from .kube.pod_agents import pod_agents
from .models import iso

if TYPE_CHECKING:
    from .cloud import Cloud

log = logging.getLogger("cloudsim.agents")

POST_TIMEOUT = 5.0  # Seconds per heartbeat POST.
MAX_RETRY_AFTER = 300.0  # Seconds: the real agent never waits longer than its 5-minute back-off.
MAX_ANSWER = 64 * 1024  # Bytes of a portal answer worth reading.
# The portal is local to the emulator; a proxy from the environment must not swallow heartbeats.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@dataclass
class AgentState:
    """One VM's agent: its schedule (time.monotonic() seconds) and the stats /_sim/agents shows."""

    vm: str
    rng: random.Random  # Seeded by the VM name, so a VM's samples are the same run after run.
    config: AgentConfig | None = None  # The config the schedule below belongs to.
    next_due: float | None = None  # None: post at the next tick.
    reply_interval: float | None = None  # Seconds, from the portal's last 202 for `config`.
    stopped: AgentConfig | None = None  # Answered 410 for this config: quiet until it changes.
    in_flight: bool = False
    samples: int = 0
    posts: int = 0
    accepted: int = 0
    failures: int = 0
    last_status: int | None = None  # None: no HTTP answer (see last_error).
    last_error: str | None = None
    last_post_at: float | None = None  # Unix seconds.
    profile: str | None = None  # The profile played, and since when (UTC): what the IDE
    profile_since: datetime | None = None  # activity of tab_open and training dates from.


@dataclass(frozen=True)
class Host:
    """Where an agent runs, as this tick sees it: a VM or a pod. gpu: the GPU model; count:
    whole GPUs; mig_profile: the one MIG device a pod holds, else None."""

    name: str
    config: AgentConfig | None
    running: bool
    gpu: GpuModel
    count: int
    mig_profile: str | None = None
    setup: dict | None = None  # A VM's environment setup, as its agent reports it (guest_setup)


NO_GPU = GpuModel(None, 0)  # A container without a GPU: NVML's library is not even mounted.


def hosts(cloud: "Cloud") -> dict[str, Host]:
    """Every VM, and every pod whose container runs the agent, by lower-case name (a VM wins
    a name both have). The caller holds cloud.lock."""
    found: dict[str, Host] = {}
    wall = time.time()
    for vm in cloud.vms.values():
        size = cloud.catalog.get(vm.location, vm.size)
        # A guest rebooting (the driver extension's reboot) runs no agent for that while.
        reboot = vm.rebooting
        running = vm.power == "running" and not (reboot and reboot[0] <= wall < reboot[1])
        config = agent_config(vm.custom_data)
        gpus = size.gpus if size else 1
        # NVML needs the driver (cloudsim.extensions): without it the agent sees no GPU.
        driver = vm.driver or not cloud.extension_play.drivers_required
        gpu = gpu_model(vm.size) if driver else NO_GPU
        setup = guest_setup.reading(cloud, vm, wall) if running and config else None
        found[vm.name.lower()] = Host(vm.name, config, running, gpu, gpus, setup=setup)
    for cluster in cloud.kube.clusters.values():
        for pod in pod_agents(cluster):
            has_gpu = pod.mig_profile is not None or pod.gpus > 0
            gpu = gpu_model(pod.vm_size) if has_gpu and pod.vm_size else NO_GPU
            host = Host(pod.name, pod.config, pod.running, gpu, pod.gpus, pod.mig_profile)
            found.setdefault(pod.name.lower(), host)
    return found


@dataclass(frozen=True)
class Job:
    """One heartbeat to post; generation ties it to the AgentBook state it was built from."""

    key: str
    config: AgentConfig
    body: dict
    generation: int


@dataclass(frozen=True)
class Outcome:
    """What a POST got: status (None when no HTTP answer), error text, the portal's
    interval_seconds (202 only) and Retry-After, both in seconds."""

    status: int | None
    error: str | None = None
    interval: float | None = None
    retry_after: float | None = None


class AgentBook:
    """Profiles and stats of the agents; every method expects `cloud.lock` held."""

    def __init__(self, default_profile: str = "busy"):
        self.configured_default = check_profile(default_profile)
        self.generation = 0
        self.reset()

    def reset(self) -> None:
        """Forget profiles and stats; restore the configured default profile."""
        self.default_profile = self.configured_default
        self.profiles: dict[str, str] = {}  # VM name (lower-case) -> profile.
        self.spike_every: dict[str, int] = {}  # VM name (lower-case) -> samples per spike.
        self.states: dict[str, AgentState] = {}
        self.generation += 1  # Posts in flight across a reset must not write into new stats.

    def set_profile(self, vm_name: str, profile: str, spike_every: int | None = None) -> None:
        """Profile for one VM, existing or not yet created; spike_every only matters for spiky."""
        self.profiles[vm_name.lower()] = check_profile(profile)
        if spike_every is not None:
            self.spike_every[vm_name.lower()] = spike_every

    def set_default(self, profile: str) -> None:
        """Profile of every VM without a profile of its own."""
        self.default_profile = check_profile(profile)

    def profile_of(self, vm_name: str) -> str:
        return self.profiles.get(vm_name.lower(), self.default_profile)

    def due_jobs(self, cloud: "Cloud", now: float) -> list[Job]:
        """Build the heartbeats due at `now` (monotonic seconds) and mark them in flight."""
        jobs = []
        found = hosts(cloud)
        for key, state in self.states.items():
            host = found.get(key)
            if host is None or host.config is None or not host.running:
                state.next_due = None  # A restarted agent posts as soon as it boots.
        for key, host in found.items():
            if host.config is None or not host.running:
                continue
            state = self.states.get(key)
            if state is None:
                state = self.states[key] = AgentState(host.name, random.Random(host.name))
            job = self._job_for(key, host, state, host.config, now)
            if job is not None:
                jobs.append(job)
        return jobs

    def _job_for(self, key: str, host: Host, state: AgentState, config: AgentConfig, now: float):
        if state.config != config:  # Re-created with a new token or interval: start afresh.
            state.config, state.next_due, state.reply_interval = config, None, None
        profile = self.profile_of(host.name)
        if state.in_flight or profile == "silent" or state.stopped == config:
            return None
        if state.next_due is not None and now < state.next_due:
            return None
        state.samples += 1
        state.next_due = now + (state.reply_interval or config.interval)
        state.in_flight = True
        every = self.spike_every.get(key, DEFAULT_SPIKE_EVERY)
        wall = datetime.now(UTC)
        if state.profile != profile:
            state.profile, state.profile_since = profile, wall
        sample = make_sample(
            profile, state.rng, host.gpu, host.count, state.samples, every, host.mig_profile,
            now=wall, started=state.profile_since,
        )  # fmt: skip
        sample.update(host.setup or {})
        body = {"agent_version": AGENT_VERSION, "samples": [sample]}
        return Job(key, config, body, self.generation)

    def record(self, job: Job, outcome: Outcome, now: float) -> None:
        """Account for a finished POST; now is time.monotonic() seconds."""
        state = self.states.get(job.key)
        if job.generation != self.generation or state is None:
            return
        _log_outcome(state, job, outcome)
        state.in_flight = False
        state.posts += 1
        state.last_status, state.last_error = outcome.status, outcome.error
        state.last_post_at = time.time()
        if outcome.status == 202:
            state.accepted += 1
            if outcome.interval and state.config == job.config:
                state.reply_interval = outcome.interval
                state.next_due = now + outcome.interval
        else:
            state.failures += 1
        if outcome.status == 410:
            state.stopped = job.config  # The workspace is gone; a new config revives the agent.
        if outcome.status != 202 and outcome.retry_after and state.next_due is not None:
            state.next_due = max(state.next_due, now + min(outcome.retry_after, MAX_RETRY_AFTER))

    def listing(self, cloud: "Cloud") -> list[dict]:
        """/_sim/agents rows: VMs and pods with an agent config, and those that have had one
        since reset."""
        found = hosts(cloud)
        keys = {k for k, host in found.items() if host.config} | set(self.states)
        return [self._row(found.get(key), self.states.get(key)) for key in sorted(keys)]

    def _row(self, host: Host | None, state: AgentState | None) -> dict:
        """One listing row. Never the token."""
        name = host.name if host is not None else state.vm
        config = host.config if host is not None else state.config
        profile = self.profile_of(name)
        stopped = state is not None and config is not None and state.stopped == config
        running = host is not None and host.running
        stats = state or _NO_STATS
        return {
            "vm": name,
            "workspace": config.workspace if config else None,
            "profile": profile,
            "active": bool(running and config and profile != "silent" and not stopped),
            "posts": stats.posts,
            "accepted": stats.accepted,
            "failures": stats.failures,
            "last_status": stats.last_status,
            "last_error": stats.last_error,
            "last_post_at": iso(stats.last_post_at),
        }


_NO_STATS = AgentState("", random.Random(0))  # Zero counts for a VM that has not posted yet.


def _log_outcome(state: AgentState, job: Job, outcome: Outcome) -> None:
    # Every heartbeat at DEBUG; INFO only when a VM's answer changes, to keep logs readable.
    changed = (outcome.status, outcome.error) != (state.last_status, state.last_error)
    level = logging.INFO if changed or state.posts == 0 else logging.DEBUG
    what = outcome.status if outcome.status is not None else outcome.error
    log.log(level, "agent of %s -> workspace %s: %s", state.vm, job.config.workspace, what)


def send(job: Job) -> Outcome:
    """POST one heartbeat to the portal (at most POST_TIMEOUT seconds); never raises."""
    request = urllib.request.Request(
        job.config.heartbeat_url, data=json.dumps(job.body).encode(), method="POST"
    )
    request.add_header("Authorization", f"Bearer {job.config.token}")
    request.add_header("Content-Type", "application/json")
    request.add_header("User-Agent", f"gpu-portal-agent/{AGENT_VERSION} (cloudsim)")
    try:
        with _OPENER.open(request, timeout=POST_TIMEOUT) as response:
            return _outcome(response.status, response.headers, response.read(MAX_ANSWER))
    except urllib.error.HTTPError as err:
        return _outcome(err.code, err.headers, _read(err))
    except (OSError, ValueError, http.client.HTTPException) as err:  # Refused, timeout, bad URL.
        reason = getattr(err, "reason", err)
        return Outcome(None, f"{type(reason).__name__}: {reason}"[:200])


def _read(err: urllib.error.HTTPError) -> bytes:
    try:
        return err.read(MAX_ANSWER)
    except (OSError, http.client.HTTPException):
        return b""


def _outcome(status: int, headers, raw: bytes) -> Outcome:
    try:
        body = json.loads(raw) if raw else {}
    except ValueError:
        body = {}
    body = body if isinstance(body, dict) else {}
    interval = body.get("interval_seconds")
    ok = isinstance(interval, int | float) and not isinstance(interval, bool) and interval > 0
    error = None if status == 202 else str(body.get("error") or f"HTTP {status}")[:200]
    return Outcome(status, error, float(interval) if ok else None, _retry_after(headers))


def _retry_after(headers) -> float | None:
    """Retry-After in seconds (the delta form; an HTTP date is ignored)."""
    try:
        value = float((headers or {}).get("Retry-After") or "")
    except ValueError:
        return None
    return value if value > 0 else None


class AgentPlayer:
    """The thread that plays every running VM's and pod's agent; start() and stop() are
    idempotent.

    tick: seconds between looks at the VMs and pods (the finest heartbeat interval it can keep)."""

    def __init__(self, cloud: "Cloud", tick: float = 0.05):
        self.cloud = cloud
        self.tick = tick
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._guard = threading.Lock()

    def start(self) -> None:
        with self._guard:
            if self._thread is not None:
                return
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="cloudsim-agents", daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        """Stop ticking (posts already under way finish on their own threads)."""
        with self._guard:
            thread, self._thread = self._thread, None
            self._stop.set()
        if thread is not None:
            thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.wait(self.tick):
            try:
                self.tick_once()
            except Exception:  # A bug must cost one tick, never the agents.
                log.exception("agent player tick failed")

    def tick_once(self) -> int:
        """Start the heartbeats due now; returns how many."""
        with self.cloud.lock:
            # Operations that ended meanwhile decide which VMs run. Pods are taken as the last
            # Kubernetes request left them: running the controllers here would make what a
            # test's next request sees depend on this thread's timing.
            self.cloud.advance()
            jobs = self.cloud.agents.due_jobs(self.cloud, time.monotonic())
        for job in jobs:
            name = f"cloudsim-agent-{job.key}"
            threading.Thread(target=self._deliver, args=(job,), name=name, daemon=True).start()
        return len(jobs)

    def _deliver(self, job: Job) -> None:
        try:
            outcome = send(job)
        except Exception:  # send() should not raise; if it does, the VM must not stay in flight.
            log.exception("heartbeat for %s failed", job.key)
            outcome = Outcome(None, "internal error")
        try:
            with self.cloud.lock:
                self.cloud.agents.record(job, outcome, time.monotonic())
        except Exception:
            log.exception("recording the heartbeat for %s failed", job.key)
