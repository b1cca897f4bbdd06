"""``/metrics`` scrape time and SQL query count with 10,000 workspaces.

Builds a fresh PostgreSQL database (portal_bench_metrics) with the demo data, then gives the
team Vision Lab ``--workspaces`` workspaces with ``--days`` of usage (benchmarks/spend_page.py's
generator: running, stopped and deleted ones, each with its compute and disk intervals), rolls
them up with the product's rollup_rebuild, and scrapes ``/metrics`` with its bearer token
through Django's test client, in a process started as gunicorn starts a worker (portal.wsgi).
Prints the median and p95 server time and the queries per scrape, first with a small fleet
and then with the full one: the query count must not change.

    python benchmarks/metrics_scrape.py                     # 10,000 workspaces, 60 days
    python benchmarks/metrics_scrape.py --workspaces 1000 --days 30 --runs 10
    python benchmarks/metrics_scrape.py --reuse             # measure the database built before

Each size is measured twice: with the month's spend computed at every scrape
(METRICS_SPEND_CACHE_SECONDS=0) and reused from the cache for 60 s (the default).
"""

import argparse
import os
import secrets
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

os.environ.setdefault("SECRET_KEY", secrets.token_urlsafe(50))
TOKEN = secrets.token_urlsafe(32)
ROOT = Path(__file__).resolve().parent.parent
PG_ADMIN = "postgres://postgres@127.0.0.1:5432/postgres"
BENCH_DB = "portal_bench_metrics"
SMALL_FLEET = 100


def _fresh_database() -> None:
    import psycopg

    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {BENCH_DB} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {BENCH_DB}")


def _scrape(runs: int) -> tuple[list[float], int, int]:
    """(milliseconds per scrape, queries per scrape, bytes) over ``runs`` scrapes."""
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    client = Client()
    headers = {"Authorization": f"Bearer {TOKEN}"}
    client.get("/metrics", headers=headers)  # warm-up: first connection, imports
    times, queries, size = [], 0, 0
    for _ in range(runs):
        with CaptureQueriesContext(connection) as captured:
            t0 = time.perf_counter()
            response = client.get("/metrics", headers=headers)
            times.append((time.perf_counter() - t0) * 1000)
        assert response.status_code == 200, response.status_code
        queries, size = len(captured), len(response.content)
    return times, queries, size


def _report(label: str, runs: int) -> None:
    """Scrapes with the month's spend computed at each (METRICS_SPEND_CACHE_SECONDS=0), then
    reused from the cache (60 s, the default: every scrape but the first within a minute)."""
    from django.conf import settings
    from django.core.cache import cache

    from workspaces.models import Workspace

    for seconds in (0, 60):
        settings.METRICS_SPEND_CACHE_SECONDS = seconds
        cache.clear()
        times, queries, size = _scrape(runs)
        p95 = sorted(times)[min(len(times) - 1, round(0.95 * (len(times) - 1)))]
        print(
            f"{label:<18} ({Workspace.objects.count():,} in the db, spend cache {seconds:>2} s)"
            f" /metrics median={statistics.median(times):7.1f} ms p95={p95:7.1f} ms "
            f"queries={queries} bytes={size:,}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workspaces", type=int, default=10_000)
    parser.add_argument("--days", type=int, default=60)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--reuse", action="store_true", help="measure the existing database")
    args = parser.parse_args()
    now = datetime.now(UTC).replace(microsecond=0)
    if not args.reuse:
        _fresh_database()
    os.environ.update(
        DATABASE_URL=f"postgres://postgres@127.0.0.1:5432/{BENCH_DB}",
        PORTAL_VAR_DIR=str(ROOT / "var" / "bench-metrics"),
        ALLOWED_HOSTS="testserver",
        LOG_LEVEL="WARNING",
        DJANGO_SETTINGS_MODULE="portal.settings",
        METRICS_TOKEN=TOKEN,
    )
    os.environ.pop("PROMETHEUS_MULTIPROC_DIR", None)
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import django

    django.setup()
    _run(args, now)


def _run(args, now: datetime) -> None:
    from django.core.management import call_command
    from django.db import connection
    from spend_page import _fixtures, _generate

    from billing.rollups import rollup_rebuild

    call_command("migrate", verbosity=0)
    import portal.wsgi  # noqa: F401  start as gunicorn does: views imported, start-up GC-frozen

    if args.reuse:
        _report(f"{args.workspaces:,} workspaces", args.runs)
        return
    with open(os.devnull, "w") as quiet:
        call_command("seed_demo", stdout=quiet)
    team, owners, offerings = _fixtures()
    since = (now - timedelta(days=args.days + 130)).date()
    _generate(team, owners, offerings, SMALL_FLEET, args.days, now, seed=1)
    rollup_rebuild(now=now, since=since)
    _report(f"{SMALL_FLEET} workspaces", args.runs)
    t0 = time.perf_counter()
    added = _generate(team, owners, offerings, args.workspaces - SMALL_FLEET, args.days, now, 2)
    rollup_rebuild(now=now, since=since)
    with connection.cursor() as cursor:  # what autovacuum does after a bulk load
        cursor.execute("ANALYZE")
    print(f"generated {added:,} intervals and rolled them up in {time.perf_counter() - t0:.1f} s")
    _report(f"{args.workspaces:,} workspaces", args.runs)


if __name__ == "__main__":
    main()
