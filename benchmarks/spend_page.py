"""Team spend page at scale: server time and SQL query count with a year of usage.

Builds a fresh PostgreSQL database with the demo data, then gives the team Vision Lab a year of
workspaces: each lives 30-120 days and runs a few sessions a day (fewer at weekends), so the
year holds several million UsageInterval rows (written with COPY). Rolls them up with the
product's own ``rollup_rebuild`` (timed), then requests the spend page and its chart JSON as
the team admin through Django's test client (and the Cost Management panel the page then loads
with htmx), in a process started as gunicorn starts a worker (portal.wsgi), and prints the
median and p95 server time and the queries per request, first with a small fleet and then
with the full one: the query count must not change.

    python benchmarks/spend_page.py                       # 10,000 workspaces, 365 days
    python benchmarks/spend_page.py --workspaces 1000 --days 90
    python benchmarks/spend_page.py --reuse               # skip generation, reuse the database
    python benchmarks/spend_page.py --now 2026-11-20T23:00:00+00:00

The data is generated for, and the pages measured at, one moment: by default the latest
weekday 18:00 UTC, when today (priced live, not yet rolled up) is about as full as it gets.
``--reuse`` measures again at the moment the database was built for.
"""

import argparse
import os
import random
import secrets
import statistics
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

# Outside the embedded default the portal refuses to start without SECRET_KEY
# (portal/secret_key.py): every process this benchmark starts inherits this one.
os.environ.setdefault("SECRET_KEY", secrets.token_urlsafe(50))

ROOT = Path(__file__).resolve().parent.parent
PG_ADMIN = "postgres://postgres@127.0.0.1:5432/postgres"
BENCH_DB = "portal_bench_spend"
SMALL_FLEET = 100
SIZES = ("Standard_NC24ads_A100_v4", "Standard_NC4as_T4_v3", "Standard_NV36ads_A10_v5")


def _fresh_database(now: datetime) -> None:
    import psycopg

    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {BENCH_DB} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {BENCH_DB}")
        conn.execute(f"COMMENT ON DATABASE {BENCH_DB} IS '{now.isoformat()}'")  # for --reuse


def _built_at() -> datetime:
    """The moment the existing database was generated for."""
    import psycopg

    with psycopg.connect(PG_ADMIN) as conn:
        (comment,) = conn.execute(
            "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s",
            [BENCH_DB],
        ).fetchone()
    return datetime.fromisoformat(comment)


def _busy_moment(now: datetime) -> datetime:
    """The latest weekday 18:00 UTC before ``now``: most of the day's sessions have run, so
    today (priced live) holds about as many intervals as it ever does."""
    moment = now.replace(hour=18, minute=0, second=0, microsecond=0)
    while moment > now or moment.weekday() >= 5:
        moment -= timedelta(days=1)
    return moment


def _sessions(rng: random.Random, day: datetime) -> list[tuple[datetime, datetime]]:
    """A day's allocated stretches (UTC): 3-8 on weekdays, 0-2 at weekends, 15 min to 2 h."""
    count = rng.randint(3, 8) if day.weekday() < 5 else rng.randint(0, 2)
    sessions, clock = [], day + timedelta(hours=rng.uniform(6, 9))
    for _ in range(count):
        start = clock + timedelta(minutes=rng.uniform(5, 60))
        end = start + timedelta(minutes=rng.uniform(15, 120))
        if end.date() != day.date():
            break
        sessions.append((start, end))
        clock = end
    return sessions


def _workspace_usage(rng, born: datetime, dies: datetime, now: datetime):
    """(compute stretches, disk stretch) for one workspace; stretches past now stay open."""
    compute, day = [], born.replace(hour=0, minute=0, second=0, microsecond=0)
    while day < min(dies, now):
        for start, end in _sessions(rng, day):
            if born <= start < min(dies, now):
                compute.append((start, None if end > now else min(end, dies)))
        day += timedelta(days=1)
    if not compute:
        return [], None
    disk = (compute[0][0], None if dies > now else dies)
    return compute, disk


def _generate(team, owners, offerings, count: int, days: int, now: datetime, seed: int):
    """Insert ``count`` workspaces and their intervals; returns how many intervals."""
    from django.db import connection

    from workspaces.models import Workspace

    rng = random.Random(seed)
    workspaces, intervals = [], []
    for n in range(count):
        offering = offerings[n % len(offerings)]
        born = now - timedelta(days=rng.uniform(0, days))
        dies = born + timedelta(days=rng.uniform(30, 120))
        compute, disk = _workspace_usage(rng, born, dies, now)
        status = (
            "deleted"
            if dies <= now
            else "running"
            if compute[-1:] and compute[-1][1] is None
            else "stopped"
        )
        ws = Workspace(
            kind="vm",
            id=uuid.UUID(int=rng.getrandbits(128)),
            team=team,
            owner=owners[n % len(owners)],
            name=f"bench-{seed}-{n}",
            status=status,
            status_changed_at=now,
            vm_size=offering.vm_size,
            region=offering.region,
            price_per_hour=offering.price_per_hour,
            gpu_model=offering.gpu_model,
            gpu_count=offering.gpu_count,
            ssh_user="researcher",
            ssh_public_key="ssh-ed25519 AAAA bench",
            request_key=uuid.UUID(int=rng.getrandbits(128)),
            created_at=born,
            updated_at=now,
        )
        workspaces.append(ws)
        for start, end in compute:
            intervals.append(
                (
                    ws.id,
                    team.pk,
                    "vm",  # the workspace's kind
                    "compute",
                    "vm",
                    offering.vm_size,
                    offering.region,
                    start,
                    end,
                    offering.price_per_hour,
                    False,
                    1,
                    1,
                )
            )
        if disk:
            intervals.append(
                (
                    ws.id,
                    team.pk,
                    "vm",
                    "disk",
                    "disk",
                    "P10 LRS",
                    offering.region,
                    disk[0],
                    disk[1],
                    "0.027",
                    False,
                    1,
                    1,
                )
            )
    Workspace.objects.bulk_create(workspaces, batch_size=2000)
    columns = (
        "workspace_id, team_id, kind, meter, price_kind, sku, region, started_at, ended_at, "
        "price_per_hour, spot, share_num, share_den"
    )
    with connection.cursor() as cursor:
        raw = cursor.connection
        with raw.cursor().copy(f"COPY billing_usageinterval ({columns}) FROM STDIN") as copy:
            for row in intervals:
                copy.write_row(row)
    return len(intervals)


def _fixtures():
    from django.contrib.auth import get_user_model

    from teams.models import Team
    from workspaces.models import SizeOffering

    team = Team.objects.get(slug="vision-lab")
    owners = list(get_user_model().objects.filter(memberships__team=team))
    offerings = list(SizeOffering.objects.filter(vm_size__in=SIZES, region="eastus"))
    return team, owners, offerings


def _measure(path: str, runs: int, headers: dict) -> tuple[list[float], int]:
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    client = Client()
    client.force_login(get_user_model().objects.get(username="victor"))
    client.get(path, headers=headers)  # warm-up: template loading, first connection
    times, queries = [], 0
    for _ in range(runs):
        with CaptureQueriesContext(connection) as captured:
            t0 = time.perf_counter()
            response = client.get(path, headers=headers)
            times.append((time.perf_counter() - t0) * 1000)
        assert response.status_code == 200, response.status_code
        queries = len(captured)
    return times, queries


def _report(label: str, runs: int) -> None:
    for path, headers in (
        ("/teams/vision-lab/spend/", {}),
        ("/teams/vision-lab/spend/data/", {}),
        ("/teams/vision-lab/spend/reconciliation/", {"HX-Request": "true"}),  # htmx, after
    ):
        times, queries = _measure(path, runs, headers)
        p95 = sorted(times)[min(len(times) - 1, round(0.95 * (len(times) - 1)))]
        print(
            f"{label:<20} {path:<40} median={statistics.median(times):7.1f} ms "
            f"p95={p95:7.1f} ms queries={queries}"
        )


def _counts() -> str:
    from billing.models import DailySpend, UsageInterval
    from workspaces.models import Workspace

    return (
        f"{Workspace.objects.count():,} workspaces, {UsageInterval.objects.count():,} intervals, "
        f"{DailySpend.objects.count():,} daily rows"
    )


def _live(now: datetime) -> str:
    """How much of the page is priced live: today's intervals (the spend page's hour matters:
    late in a weekday the fleet has had most of its sessions)."""
    from django.db.models import Q

    from billing.models import UsageInterval

    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)  # Vision Lab is on UTC
    today = UsageInterval.objects.filter(Q(ended_at__isnull=True) | Q(ended_at__gt=midnight))
    return f"live today: {today.count():,} intervals at {now:%H:%M} UTC ({now:%A})"


def _azure_costs(now: datetime) -> None:
    """What the nightly Cost Management sync leaves: Azure's cost per workspace tag and UTC
    day of the month so far (here the rolled-up spend, 1% more for one workspace in ten), and
    the portal's estimate beside it, stored by the product's cost_estimates_store (timed)."""
    from billing.actual_costs import cost_estimates_store
    from billing.models import ActualCost, ActualCostDay, DailySpend

    first, today = now.date().replace(day=1), now.date()
    if ActualCostDay.objects.filter(day=today - timedelta(days=1), fetched_at__date=today).exists():
        return  # tonight's sync is in (--reuse)
    days = DailySpend.objects.filter(day__gte=first, day__lt=today).values_list(
        "workspace_id", "team_id", "day", "cost"
    )
    totals: dict[tuple, Decimal] = {}
    for workspace, team, day, cost in days:
        totals[(workspace, team, day)] = totals.get((workspace, team, day), Decimal(0)) + cost
    ActualCost.objects.filter(day__gte=first).delete()
    ActualCost.objects.bulk_create(
        (
            ActualCost(
                workspace_id=workspace,
                team_id=team,
                workspace_tag=str(workspace),
                day=day,
                cost=cost * (Decimal("1.01") if workspace.int % 10 == 0 else 1),
                fetched_at=now,
            )
            for (workspace, team, day), cost in totals.items()
        ),
        batch_size=5000,
    )
    span = [first + timedelta(days=n) for n in range((today - first).days + 1)]
    ActualCostDay.objects.filter(day__gte=first).delete()
    ActualCostDay.objects.bulk_create(ActualCostDay(day=day, fetched_at=now) for day in span)
    t0 = time.perf_counter()
    stored = cost_estimates_store(first=first, last=today, now=now)
    print(
        f"Azure's costs: {len(totals):,} workspace-days; cost_estimates_store (nightly) wrote "
        f"{stored:,} estimates in {time.perf_counter() - t0:.1f} s"
    )


def _rollup(now: datetime, incremental: bool = False) -> None:
    from django.db import connection

    from billing.rollups import rollup_rebuild

    t0 = time.perf_counter()
    since = None if incremental else (now - timedelta(days=400)).date()
    written = rollup_rebuild(now=now, since=since)
    print(f"rollup_rebuild: {written:,} DailySpend rows in {time.perf_counter() - t0:.1f} s")
    with connection.cursor() as cursor:  # what autovacuum does after a bulk load
        cursor.execute("ANALYZE")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workspaces", type=int, default=10_000)
    parser.add_argument("--days", type=int, default=365)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--reuse", action="store_true", help="measure the existing database")
    parser.add_argument(
        "--now",
        type=datetime.fromisoformat,
        help="the moment to generate for and measure at (default: the latest weekday 18:00 UTC)",
    )
    args = parser.parse_args()
    if args.reuse:
        now = args.now or _built_at()
    else:
        now = args.now or _busy_moment(datetime.now(UTC))
        _fresh_database(now)
    os.environ.update(
        DATABASE_URL=f"postgres://postgres@127.0.0.1:5432/{BENCH_DB}",
        PORTAL_VAR_DIR=str(ROOT / "var" / "bench"),
        ALLOWED_HOSTS="testserver",
        LOG_LEVEL="WARNING",
        DJANGO_SETTINGS_MODULE="portal.settings",
    )
    sys.path.insert(0, str(ROOT))
    import django
    import time_machine

    django.setup()
    with time_machine.travel(now, tick=True):  # the pages' clock, from that moment on
        _run(args, now)


def _run(args, now: datetime) -> None:
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    call_command("collectstatic", interactive=False, verbosity=0)
    import portal.wsgi  # noqa: F401  start as gunicorn does: views imported, start-up GC-frozen

    if not args.reuse:
        with open(os.devnull, "w") as quiet:
            call_command("seed_demo", stdout=quiet)
        team, owners, offerings = _fixtures()
        _generate(team, owners, offerings, SMALL_FLEET, args.days, now, seed=1)
        _rollup(now)
        print(_counts())
        _report(f"{SMALL_FLEET} workspaces", args.runs)
        t0 = time.perf_counter()
        added = _generate(team, owners, offerings, args.workspaces - SMALL_FLEET, args.days, now, 2)
        print(f"generated {added:,} intervals in {time.perf_counter() - t0:.1f} s")
        _rollup(now)
    else:
        _rollup(now, incremental=True)  # what the beat does every SPEND_ROLLUP_SECONDS
    _azure_costs(now)
    print(_counts())
    print(_live(now))
    _report(f"{args.workspaces:,} workspaces", args.runs)


if __name__ == "__main__":
    main()
