"""The fair queue's numbers (docs/scarce-gpus.md, issue 34):

1. the decision time of one pass with 10,000 queued requests from 200 teams (each team's
   quota full, so the pass orders all 10,000 and checks the room of every one; target <= 1 s);
2. the time from a GPU freeing (the holder's *Deleted*) to the next queued workspace leaving
   the queue (*Requested*) and to its VM being up (*Setting up*, or *Running*), through a
   real Celery worker and the emulator (target <= 5 s p99 to start).

PostgreSQL and Redis at 127.0.0.1, a fresh database, the emulator in a thread, a real worker:

    python benchmarks/queue_pass.py                  # 10,000 x 200 teams, 20 hand-overs
    python benchmarks/queue_pass.py --waiting 2000 --teams 50 -n 10 --latency 0.2
"""

import argparse
import os
import secrets
import statistics
import subprocess
import sys
import time
import uuid
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

os.environ.setdefault("SECRET_KEY", secrets.token_urlsafe(50))

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.request_to_put import PG_ADMIN, SSH_KEY, _percentile  # noqa: E402

BENCH_DB = "portal_bench_queue"
REDIS_URL = "redis://127.0.0.1:6379/12"
SIZE = "Standard_NC24ads_A100_v4"


def _fresh_postgres_db() -> None:
    import psycopg

    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {BENCH_DB} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {BENCH_DB}")


def _seed(waiting: int, teams: int):
    """``teams`` teams, each with its A100 quota (4) held by 4 running workspaces, a week of
    past use, and ``waiting`` queued requests spread over them."""
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from billing.models import UsageInterval
    from teams.models import GpuQuota, Membership, Team
    from workspaces.models import Workspace, WorkspaceEvent
    from workspaces.states import Status

    now = timezone.now()
    user = get_user_model().objects.create(username="bench-owner")
    team_rows = Team.objects.bulk_create(
        [
            Team(name=f"Bench {i}", slug=f"bench-{i}", max_workspaces_per_user=30_000)
            for i in range(teams)
        ]
    )
    Membership.objects.bulk_create([Membership(team=t, user=user) for t in team_rows])
    GpuQuota.objects.bulk_create([GpuQuota(team=t, gpu_model="A100", gpus=4) for t in team_rows])

    def ws(team, status, i, at):
        return Workspace(
            team=team, owner=user, kind="vm", name=f"{status}-{i}", status=status,
            status_changed_at=at, vm_size=SIZE, region="eastus", gpu_model="A100",
            gpu_count=1, price_per_hour=Decimal("3.6730"), ssh_user="bench",
            ssh_public_key=SSH_KEY, request_key=uuid.uuid4(), created_at=at, updated_at=at,
            queue_when_full=True,
        )  # fmt: skip

    running = Workspace.objects.bulk_create(
        [
            ws(t, Status.RUNNING, i, now - timedelta(hours=i % 7))
            for t in team_rows
            for i in range(4)
        ]
    )
    UsageInterval.objects.bulk_create(
        [
            UsageInterval(
                workspace=w,
                team=w.team,
                kind="vm",
                sku=SIZE,
                region="eastus",
                started_at=now - timedelta(days=1 + i % 6, hours=i % 11),
                ended_at=now - timedelta(days=1 + i % 6),
                price_per_hour=Decimal("3.6730"),
            )  # fmt: skip
            for i, w in enumerate(running)
        ]
    )
    queued = Workspace.objects.bulk_create(
        [
            ws(team_rows[i % teams], Status.QUEUED, i, now - timedelta(seconds=waiting - i))
            for i in range(waiting)
        ]
    )
    WorkspaceEvent.objects.bulk_create(
        [WorkspaceEvent(workspace=w, at=w.created_at, to_status=Status.QUEUED) for w in queued]
    )
    return team_rows


def decision_time(waiting: int, teams: int, rounds: int = 5) -> None:
    from django.utils import timezone

    from scheduling.queue import queue_pass

    _seed(waiting, teams)
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        result = queue_pass(now=timezone.now())
        times.append(time.perf_counter() - t0)
        assert not result.admitted and result.looked_at == waiting
    print(
        f"pass over {waiting} queued from {teams} teams (none fits): "
        f"median {statistics.median(times):.3f} s, max {max(times):.3f} s over {rounds} passes"
    )


def _wait_for(workspace_id, *statuses: str, timeout: float = 60.0):
    from workspaces.models import WorkspaceEvent

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = WorkspaceEvent.objects.filter(workspace_id=workspace_id, to_status__in=statuses)
        event = found.last()
        if event is not None:
            return event.at
        time.sleep(0.005)
    raise RuntimeError(f"{workspace_id} not {statuses} within {timeout} s")


def hand_overs(n: int) -> None:
    """A team with one A100: each round the holder is deleted and the queued one behind it
    must start (its VM created: Setting up, or Running where no setup is owed); it becomes
    the next holder. Deleted, not stopped: a VM still setting up (its agent reports to no
    portal here) cannot be stopped, and Azure counts a deallocated VM against its quota."""
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from teams.models import GpuQuota, Membership, Team
    from workspaces.actions import workspace_delete
    from workspaces.backends.vm_request import workspace_request
    from workspaces.models import SizeOffering, Workspace

    team = Team.objects.create(name="Hand-over", slug="hand-over", max_workspaces_per_user=1000)
    GpuQuota.objects.create(team=team, gpu_model="A100", gpus=1)
    user = get_user_model().objects.create(username="hand-over")
    Membership.objects.create(team=team, user=user)
    offering = SizeOffering.objects.get(vm_size=SIZE, region="eastus")

    def ask(i):
        return workspace_request(
            user=user, team=team, name=f"h{i}", offering=offering, ssh_public_key=SSH_KEY,
            request_key=uuid.uuid4(), now=timezone.now(), queue_when_full=True,
        ).pk  # fmt: skip

    up = ("setting_up", "running")
    holder = ask(0)
    _wait_for(holder, *up)
    to_admit, to_running = [], []
    for i in range(1, n + 1):
        nxt = ask(i)
        assert Workspace.objects.get(pk=nxt).status == "queued"
        workspace_delete(user=user, workspace=Workspace.objects.get(pk=holder), now=timezone.now())
        freed = _wait_for(holder, "deleted")
        admitted = _wait_for(nxt, "requested")
        running = _wait_for(nxt, *up)
        to_admit.append((admitted - freed).total_seconds())
        to_running.append((running - freed).total_seconds())
        holder = nxt
    rows = (("freed -> left the queue", to_admit), ("freed -> VM up", to_running))
    for name, values in rows:
        ms = [v * 1000 for v in values]
        print(
            f"{name:24} n={len(ms)} p50={statistics.median(ms):7.1f} ms "
            f"p99={_percentile(ms, 99):7.1f} ms max={max(ms):7.1f} ms"
        )


def child(waiting: int, teams: int, n: int, latency: float) -> None:
    from cloudsim import start_server

    sim_server = start_server(port=0, latency=latency, retry_after=0)
    os.environ.update(AZURE_ENDPOINT=sim_server.url, AZURE_POLLING_INTERVAL="0.1")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    with open(os.devnull, "w") as quiet:
        call_command("seed_demo", stdout=quiet)
    sim = sim_server.control
    for family in ("standardNCADSA100v4Family", "cores"):
        sim.set_quota("eastus", family, 1_000_000)
    sim.set_capacity("eastus", SIZE, 100_000)
    decision_time(waiting, teams)
    from workspaces.models import Workspace

    Workspace.objects.filter(name__startswith="queued-").delete()  # the hand-overs alone
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "portal", "worker", "-l", "WARNING", "-c", "2"],
        cwd=ROOT,
        env=os.environ.copy(),
    )
    try:
        hand_overs(n)
    finally:
        worker.terminate()
        worker.wait(30)
        sim_server.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--waiting", type=int, default=10_000)
    parser.add_argument("--teams", type=int, default=200)
    parser.add_argument("-n", type=int, default=20)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.waiting, args.teams, args.n, args.latency)
    _fresh_postgres_db()
    import tempfile

    with tempfile.TemporaryDirectory() as var_dir:
        env = {
            **os.environ,
            "PORTAL_VAR_DIR": var_dir,
            "CELERY_TASK_ALWAYS_EAGER": "0",
            "LOG_LEVEL": "WARNING",
            "ALLOWED_HOSTS": "testserver",
            "DATABASE_URL": f"postgres://postgres@127.0.0.1:5432/{BENCH_DB}",
            "CELERY_BROKER_URL": REDIS_URL,
            "REDIS_URL": REDIS_URL,
            "DJANGO_SETTINGS_MODULE": "portal.settings",
        }
        cmd = [sys.executable, __file__, "--child", "--waiting", str(args.waiting)]
        cmd += ["--teams", str(args.teams), "-n", str(args.n), "--latency", str(args.latency)]
        subprocess.run(cmd, cwd=ROOT, env=env, check=True)


if __name__ == "__main__":
    main()
