"""Lag from the moment a workspace's idle threshold is crossed to its deallocate call reaching
the emulator, over 50 workspaces in the running stack. Target: p99 <= 30 s with the default
sweep period (IDLE_SWEEP_SECONDS = 15).

Starts `make run` (gunicorn, Celery worker and beat, the emulator) on free ports with a fresh
database: PostgreSQL and Redis by default, as production; --embedded for SQLite and the
filesystem broker. The idle policy's durations and the agent interval are scaled by 1/30, so
30 minutes without GPU work become 60 s and the agents report every second; the sweep period
is not scaled. The emulator's agents report busy until all 50 VMs run, then turn idle one
after another over 30 s (two sweep periods), so the crossings fall at every phase of the sweep.

For each workspace the threshold is crossed at its last busy sample + the scaled 30 minutes
(what workspaces.idle computes as the stop time); the deallocate time is the arrival time of
the POST .../deallocate in the emulator's request log.

    python benchmarks/idle_lag.py [--workspaces 50] [--embedded]
"""

import argparse
import os
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

# Outside the embedded default the portal refuses to start without SECRET_KEY
# (portal/secret_key.py): every process this benchmark starts inherits this one.
os.environ.setdefault("SECRET_KEY", secrets.token_urlsafe(50))

ROOT = Path(__file__).resolve().parent.parent
PG = "postgres://postgres@127.0.0.1:5432/portal_bench_lag"
REDIS = "redis://127.0.0.1:6379/3"
SCALE = 1 / 30
SPREAD_SECONDS = 30
SIZE = "Standard_NC4as_T4_v3"  # 4 vCPUs, one T4: the cheapest GPU VM to run 50 of


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(var_dir: str, embedded: bool) -> dict:
    env = {
        "PORTAL_PORT": str(_free_port()),
        "CLOUDSIM_PORT": str(_free_port()),
        "PORTAL_VAR_DIR": var_dir,
        "AGENT_INTERVAL_SECONDS": str(30 * SCALE),
        "IDLE_TIME_SCALE": str(SCALE),
        "IDLE_SWEEP_SECONDS": "15",
        "CLOUDSIM_AGENT_PROFILE": "busy",
        "LOG_LEVEL": "WARNING",
        "DJANGO_SETTINGS_MODULE": "portal.settings",
    }
    if not embedded:
        import psycopg
        import redis

        with psycopg.connect(PG.rsplit("/", 1)[0] + "/postgres", autocommit=True) as c:
            c.execute("DROP DATABASE IF EXISTS portal_bench_lag WITH (FORCE)")
            c.execute("CREATE DATABASE portal_bench_lag")
        redis.Redis.from_url(REDIS).flushdb()
        env.update(DATABASE_URL=PG, CELERY_BROKER_URL=REDIS, REDIS_URL=REDIS)
    return env


def _start(env: dict) -> subprocess.Popen:
    proc = subprocess.Popen(
        ["make", "run"],
        cwd=ROOT,
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    _until(lambda: _answers(f"http://127.0.0.1:{env['PORTAL_PORT']}/healthz"), 180, "the portal")
    return proc


def _answers(url: str) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=1) as response:
            return response.status == 200
    except OSError:
        return False


def _until(predicate, seconds: float, what: str, progress=lambda: "") -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what} {progress()}")
        time.sleep(0.5)


def _request_fleet(count: int, sim) -> list:
    """Request ``count`` T4 VMs as alice of Vision Lab, quota and budget raised to fit."""
    from django.utils import timezone

    from teams.models import GpuQuota, Team
    from workspaces.backends.vm_request import workspace_request
    from workspaces.models import SizeOffering

    team = Team.objects.get(slug="vision-lab")
    Team.objects.filter(pk=team.pk).update(monthly_budget=None, max_workspaces_per_user=count)
    GpuQuota.objects.update_or_create(team=team, gpu_model="T4", defaults={"gpus": count})
    offering = SizeOffering.objects.get(vm_size=SIZE, region="eastus")
    sim.set_quota("eastus", "standardNCASv3_T4Family", 8 * count)
    sim.set_quota("eastus", "cores", 8 * count)
    sim.set_capacity("eastus", SIZE, count)
    alice = team.memberships.get(user__username="alice").user
    return [
        workspace_request(
            user=alice,
            team=team,
            name=f"lag-{i:02d}",
            offering=offering,
            ssh_public_key=(
                "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGn0rX2xM9tq0rI2tWw2c3d0Yq3bQm9hQ5r1u3kq9vK2 "
                "bench@portal"
            ),
            request_key=uuid.uuid4(),
            now=timezone.now(),
        ).pk
        for i in range(count)
    ]


def _statuses(fleet):
    """A callable saying how many workspaces of the fleet are in each status."""
    from collections import Counter

    from workspaces.models import Workspace

    def count() -> str:
        statuses = Workspace.objects.filter(pk__in=fleet).values_list("status", flat=True)
        return str(dict(Counter(statuses)))

    return count


def _lags(fleet: list, sim) -> list[float]:
    """Seconds from each workspace's threshold crossing to its deallocate reaching the emulator."""
    from django.db.models import Max, Q

    from cloud.azure_vm import vm_names
    from workspaces.models import TelemetrySample, Workspace

    busy = Q(gpu_util__gte=5) | Q(interactive__gt=0)
    last_busy = dict(
        TelemetrySample.objects.filter(busy, workspace_id__in=fleet)
        .values_list("workspace_id")
        .annotate(Max("at"))
    )
    arrivals = {
        entry["path"].split("/virtualMachines/")[1].split("/")[0]: entry["t"]
        for entry in sim.requests()
        if entry["method"] == "POST" and entry["path"].endswith("/deallocate")
    }
    lags = []
    for ws in Workspace.objects.filter(pk__in=fleet):
        crossed = last_busy[ws.pk] + timedelta(minutes=30 * SCALE)
        reached = datetime.fromtimestamp(arrivals[vm_names(ws.pk).vm], UTC)
        lags.append((reached - crossed).total_seconds())
    return lags


def main(args) -> None:
    with tempfile.TemporaryDirectory() as var_dir:
        env = _env(var_dir, args.embedded)
        os.environ.update(env)
        sys.path.insert(0, str(ROOT))
        import django

        django.setup()
        from cloud.azure_vm import vm_names
        from cloudsim.control import SimControl
        from workspaces.models import Workspace
        from workspaces.states import Status

        proc = _start(env)
        try:
            sim = SimControl(f"http://127.0.0.1:{env['CLOUDSIM_PORT']}")
            fleet = _request_fleet(args.workspaces, sim)
            running = Workspace.objects.filter(pk__in=fleet, status=Status.RUNNING)
            _until(lambda: running.count() == len(fleet), 600, "every VM to run", _statuses(fleet))
            time.sleep(3)  # a few busy samples each
            # Spread over two sweep periods, so the crossings fall at every phase of the sweep.
            for ws in Workspace.objects.filter(pk__in=fleet):
                sim.set_agent_profile(vm_names(ws.pk).vm, "idle")
                time.sleep(SPREAD_SECONDS / len(fleet))
            stopped = Workspace.objects.filter(pk__in=fleet, status=Status.STOPPED)
            _until(lambda: stopped.count() == len(fleet), 300, "every idle stop", _statuses(fleet))
            lags = sorted(_lags(fleet, sim))
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(30)
    _report(lags, args)


def _report(lags: list[float], args) -> None:
    p99 = lags[min(len(lags) - 1, round(0.99 * (len(lags) - 1)))]
    stack = "SQLite, filesystem broker" if args.embedded else "PostgreSQL, Redis"
    print(
        f"idle threshold -> deallocate at the emulator, {len(lags)} workspaces ({stack}, "
        f"sweep every 15 s): p50 {statistics.median(lags):.1f} s, p99 {p99:.1f} s, "
        f"min {lags[0]:.1f} s, max {lags[-1]:.1f} s"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--workspaces", type=int, default=50)
    parser.add_argument("--embedded", action="store_true")
    main(parser.parse_args())
