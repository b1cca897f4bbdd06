"""The pages a platform admin lands on, at the scale of an organisation, served as in production.

Builds a fresh PostgreSQL database (portal_orgscale) with the demo data plus 200 teams, 2,000
users, 10,000 workspaces in every status and kind, their pending approvals, 50,000 audit
entries and a year of usage (UsageInterval rows written with COPY, rolled up into DailySpend by
the product's own ``rollup_rebuild``). Then starts the web server, logs in the platform admin
through the login form, and for each page measures:

- one client: median and p95 wall time of ``--runs`` sequential requests, timed by this
  client over loopback from sending the request to reading the whole answer. It includes the
  loopback round trip and HTTP parsing on both sides, so it is an upper bound of the server
  time; uvicorn's access log has no duration (gunicorn's ``%(D)s`` does not apply under its
  worker). Also the workers' CPU time per request (from /proc) and the page's weight (HTML);
- the SQL queries one request runs (Django's test client in this process, same database);
- 8 concurrent clients: wrk (Debian's package, ``apt-get install wrk``) for ``--seconds``,
  its median and p95 latency and requests/s.

The server is, by default (``--server procfile``), the Procfile's ``web:`` line itself, run
through ``sh -c`` as honcho runs it, with PORTAL_PORT set to this benchmark's port: gunicorn
with 2 uvicorn workers on portal.asgi, WSGI requests in a2wsgi's PORTAL_WSGI_THREADS threads.
``--server wsgi`` starts the earlier command instead, for comparison: ``gunicorn portal.wsgi``
with 2 sync workers, which close the connection after each answer (so its one-client times
include a TCP connect); its access log's ``%(D)s`` is then printed beside the wall times.

    python benchmarks/org_scale.py                 # build, then measure
    python benchmarks/org_scale.py --reuse         # measure the database built before
    python benchmarks/org_scale.py --reuse --server wsgi

Targets (issue 15): one-client p95 <= 100 ms, <= 200 KB, queries constant in the rows.
"""

import argparse
import http.client
import json
import os
import random
import re
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

os.environ.setdefault("SECRET_KEY", secrets.token_urlsafe(50))

ROOT = Path(__file__).resolve().parent.parent
PG_ADMIN = "postgres://postgres@127.0.0.1:5432/postgres"
BENCH_DB = "portal_orgscale"
PORT = 8766
TEAMS, USERS, WORKSPACES, AUDIT = 200, 2_000, 10_000, 50_000
PAGES = {
    "workspaces": "/workspaces/",
    "workspaces, filtered": "/workspaces/?status=running&region=eastus&sort=-price",
    "workspaces, search": "/workspaces/?q=ws-012",
    "teams": "/teams/",
    "approvals": "/approvals/",
    "spend": "/spend/",
    "clusters": "/clusters/",
    "audit": "/audit/",
}
WRK_SCRIPT = """
done = function(summary, latency, requests)
  io.write(string.format('{"p50": %d, "p95": %d, "requests": %d, "seconds": %f, "errors": %d}\\n',
    latency:percentile(50), latency:percentile(95), summary.requests, summary.duration / 1e6,
    summary.errors.status + summary.errors.connect + summary.errors.read + summary.errors.timeout))
end
"""


def _fresh_database() -> None:
    import psycopg

    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {BENCH_DB} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {BENCH_DB}")


def _people(rng: random.Random, now: datetime):
    """200 teams (the demo's two among them) with GPU quotas, 2,000 users, each in one team
    (one in ten its admin). Returns (teams, members by team pk)."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.hashers import make_password

    from teams.models import GpuQuota, Membership, Role, Team

    User = get_user_model()
    Team.objects.bulk_create(
        Team(name=f"Team {n:03d}", slug=f"team-{n:03d}", monthly_budget=rng.choice([None, 5000]))
        for n in range(TEAMS - Team.objects.count())
    )
    teams = list(Team.objects.order_by("pk"))
    password = make_password("bench")  # hashed once: 2,000 hashes would take minutes
    users = User.objects.bulk_create(
        User(username=f"user{n:04d}", password=password, email=f"user{n:04d}@example.org")
        for n in range(USERS - User.objects.count())
    )
    Membership.objects.bulk_create(
        Membership(
            team=teams[n % len(teams)],
            user=user,
            role=Role.TEAM_ADMIN if n % 10 == 0 else Role.RESEARCHER,
        )
        for n, user in enumerate(users)
    )
    GpuQuota.objects.bulk_create(
        (GpuQuota(team=t, gpu_model=m, gpus=8) for t in teams for m in ("A100", "T4", "A10")),
        ignore_conflicts=True,
    )
    members: dict[int, list] = {}
    for m in Membership.objects.values("team_id", "user_id"):
        members.setdefault(m["team_id"], []).append(m["user_id"])
    return teams, members


def _workspaces(rng: random.Random, teams, members, now: datetime) -> list:
    """10,000 workspaces, every status in turn, created over the past year; one in ten a MIG
    slice and one in ten a namespace on the demo's node pools."""
    from clusters.models import NodePool
    from workspaces.models import SizeOffering, Workspace
    from workspaces.states import Status

    offerings = list(SizeOffering.objects.filter(offered=True))
    pools = list(NodePool.objects.all())
    statuses = list(Status)
    rows = []
    for n in range(WORKSPACES):
        team = teams[n % len(teams)]
        offering = offerings[n % len(offerings)]
        kind = "vm" if not pools or n % 10 > 1 else ("mig" if n % 10 == 0 else "namespace")
        created = now - timedelta(days=rng.uniform(0, 365))
        rows.append(
            Workspace(
                id=uuid.UUID(int=rng.getrandbits(128)),
                team=team,
                owner_id=rng.choice(members[team.pk]),
                kind=kind,
                node_pool=pools[n % len(pools)] if kind != "vm" else None,
                name=f"ws-{n:05d}",
                status=statuses[n % len(statuses)],
                status_changed_at=created,
                vm_size=offering.vm_size,
                region=offering.region,
                price_per_hour=offering.price_per_hour,
                gpu_model=offering.gpu_model,
                gpu_count=offering.gpu_count,
                ssh_user="researcher",
                ssh_public_key="ssh-ed25519 AAAA bench",
                request_key=uuid.UUID(int=rng.getrandbits(128)),
                created_at=created,
                updated_at=created,
            )
        )
    return Workspace.objects.bulk_create(rows, batch_size=2000)


def _approvals_and_audit(rng: random.Random, workspaces, now: datetime) -> None:
    from teams.models import AuditEntry, QuotaRequest
    from workspaces.states import Status

    QuotaRequest.objects.bulk_create(
        QuotaRequest(
            team_id=w.team_id,
            requester_id=w.owner_id,
            workspace=w,
            summary=f"{w.vm_size} in {w.region}",
            over_quota=["over the team's GPU quota"],
            justification="benchmark",
            price_per_hour=w.price_per_hour,
            created_at=w.created_at,
            expires_at=now + timedelta(days=7),
        )
        for w in workspaces
        if w.status == Status.PENDING_APPROVAL
    )
    AuditEntry.objects.bulk_create(
        (
            AuditEntry(
                at=now - timedelta(minutes=rng.uniform(0, 525_600)),
                actor_id=w.owner_id,
                team_id=w.team_id,
                action=rng.choice(["workspace.request", "workspace.stop", "team.quota"]),
                object_type="workspace",
                object_id=str(w.pk),
                before={"status": "running"},
                after={"status": "stopped"},
            )
            for w in (rng.choice(workspaces) for _ in range(AUDIT))
        ),
        batch_size=5000,
    )


def _usage(rng: random.Random, workspaces, now: datetime) -> int:
    """A year of compute: each workspace runs one session of 1-6 h on two weekdays in three
    from its creation until now (open if running now). Written with COPY; returns the count."""
    from django.db import connection

    from workspaces.states import Status

    columns = (
        "workspace_id, team_id, kind, meter, price_kind, sku, region, started_at, ended_at, "
        "price_per_hour, spot, share_num, share_den"
    )
    count = 0
    with (
        connection.cursor() as cursor,
        cursor.connection.cursor().copy(
            f"COPY billing_usageinterval ({columns}) FROM STDIN"
        ) as copy,
    ):
        for w in workspaces:
            day = w.created_at.replace(hour=9, minute=0, second=0, microsecond=0)
            while day < now - timedelta(days=1):
                if day.weekday() < 5 and rng.random() < 0.66 and day > w.created_at:
                    end = day + timedelta(hours=rng.uniform(1, 6))
                    copy.write_row(
                        (w.id, w.team_id, w.kind, "compute", "vm", w.vm_size, w.region,
                         day, end, w.price_per_hour, False, 1, 1)
                    )  # fmt: skip
                    count += 1
                day += timedelta(days=1)
            if w.status == Status.RUNNING:
                copy.write_row(
                    (w.id, w.team_id, w.kind, "compute", "vm", w.vm_size, w.region,
                     now - timedelta(hours=2), None, w.price_per_hour, False, 1, 1)
                )  # fmt: skip
                count += 1
    return count


def _build(now: datetime) -> None:
    from django.core.management import call_command
    from django.db import connection

    from billing.rollups import rollup_rebuild

    rng = random.Random(15)
    t0 = time.perf_counter()
    with open(os.devnull, "w") as quiet:
        call_command("seed_demo", stdout=quiet)
    teams, members = _people(rng, now)
    workspaces = _workspaces(rng, teams, members, now)
    _approvals_and_audit(rng, workspaces, now)
    intervals = _usage(rng, workspaces, now)
    print(f"built {len(teams)} teams, {sum(map(len, members.values()))} members, "
          f"{len(workspaces):,} workspaces, {intervals:,} intervals in "
          f"{time.perf_counter() - t0:.0f} s")  # fmt: skip
    t0 = time.perf_counter()
    written = rollup_rebuild(now=now, since=(now - timedelta(days=400)).date())
    print(f"rollup_rebuild: {written:,} DailySpend rows in {time.perf_counter() - t0:.0f} s")
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")  # what autovacuum does after a bulk load


def _queries(path: str) -> int:
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    client = Client()
    client.force_login(get_user_model().objects.get(username="pat"))
    with CaptureQueriesContext(connection) as captured:
        assert client.get(path).status_code == 200, path
    return len(captured)


def _procfile_web() -> str:
    """The command of the Procfile's ``web:`` line, as honcho hands it to the shell."""
    for line in (ROOT / "Procfile").read_text().splitlines():
        if line.startswith("web:"):
            return line.removeprefix("web:").strip()
    raise SystemExit("the Procfile has no web: line")


def _start_server(kind: str, env: dict, log: Path) -> subprocess.Popen:
    """The web server on PORT; waits until it answers and its other worker has booted.
    procfile: the Procfile's web line through ``sh -c`` (its ``exec`` makes gunicorn's master
    the child here); wsgi: gunicorn's sync workers on portal.wsgi, logging ``%(D)s`` to log."""
    if kind == "procfile":
        command = ["/bin/sh", "-c", _procfile_web()]
    else:
        command = [str(ROOT / ".venv/bin/gunicorn"), "portal.wsgi", "--bind",
                   f"127.0.0.1:{PORT}", "--workers", "2", "--access-logfile", str(log),
                   "--access-logformat", "%(D)s"]  # fmt: skip
    server = subprocess.Popen(
        command, cwd=ROOT, env=dict(env, PORTAL_PORT=str(PORT)),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    for _ in range(100):
        try:
            http.client.HTTPConnection("127.0.0.1", PORT, timeout=1).request("GET", "/healthz")
            time.sleep(3)  # the first worker answers while the other still loads Django
            return server
        except OSError:
            time.sleep(0.2)
    server.kill()
    raise SystemExit(f"the server did not start: {command}")


def _login(username: str, password: str) -> str:
    """The Cookie header of a session logged in through the login form, as a browser does."""
    conn = http.client.HTTPConnection("127.0.0.1", PORT)
    conn.request("GET", "/accounts/login/")
    response = conn.getresponse()
    page = response.read().decode()
    csrf = re.search(r"csrftoken=([^;]+)", response.getheader("Set-Cookie")).group(1)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    body = urllib.parse.urlencode(
        {"username": username, "password": password, "csrfmiddlewaretoken": token}
    )
    headers = {"Content-Type": "application/x-www-form-urlencoded", "Cookie": f"csrftoken={csrf}"}
    conn.request("POST", "/accounts/login/", body, headers)
    response = conn.getresponse()
    response.read()
    session = re.search(r"sessionid=([^;]+)", response.getheader("Set-Cookie") or "")
    if response.status != 302 or not session:
        raise SystemExit(f"login failed: {response.status}")
    return f"csrftoken={csrf}; sessionid={session.group(1)}"


def _cpu_seconds(server: subprocess.Popen) -> float:
    """CPU time (user + system, all threads) used so far by gunicorn's workers: on a machine
    shared with other work, wall times grow with the load, CPU time per request much less."""
    children = Path(f"/proc/{server.pid}/task/{server.pid}/children").read_text().split()
    ticks = 0
    for pid in children:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / os.sysconf("SC_CLK_TCK")


def _percentiles(times: list[float]) -> tuple[float, float]:
    times = sorted(times)
    return statistics.median(times), times[round(0.95 * (len(times) - 1))]


def _one_client(path: str, cookie: str, runs: int, server) -> tuple:
    """(wall times in ms, bytes, worker CPU ms per request) of ``runs`` sequential requests on
    one connection (re-opened after each answer if the server closes it), each timed here from
    sending the request to reading the last byte of the answer."""
    conn = http.client.HTTPConnection("127.0.0.1", PORT)
    for _ in range(3):  # warm-up: the worker's first requests fill its caches
        conn.request("GET", path, headers={"Cookie": cookie})
        conn.getresponse().read()
    time.sleep(0.2)
    cpu, times, size = _cpu_seconds(server), [], 0
    for _ in range(runs):
        t0 = time.perf_counter()
        conn.request("GET", path, headers={"Cookie": cookie})
        response = conn.getresponse()
        size = len(response.read())
        times.append((time.perf_counter() - t0) * 1000)
        assert response.status == 200, (path, response.status)
    conn.close()
    return times, size, (_cpu_seconds(server) - cpu) * 1000 / runs


def _logged(log: Path, start: int) -> str:
    """The median and p95 of the server times gunicorn logged (``%(D)s``) after byte start of
    its access log, or "" where there is no such log (the Procfile's uvicorn workers)."""
    if not log.exists():
        return ""
    time.sleep(0.2)  # the log is written after the answer
    with log.open() as f:
        f.seek(start)
        median, p95 = _percentiles([int(line) / 1000 for line in f.read().split()])
    return f"  (gunicorn %(D)s: {median:.1f} / {p95:.1f} ms)"


def _wrk(path: str, cookie: str, seconds: int, script: str) -> dict:
    out = subprocess.run(
        ["wrk", "-t", "2", "-c", "8", "-d", f"{seconds}s", "-s", script, "-H", f"Cookie: {cookie}",
         f"http://127.0.0.1:{PORT}{path}"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return json.loads(out.strip().splitlines()[-1])


def _row(label: str, path: str, cookie: str, args, server, log: Path, script: Path) -> str:
    """One page's line of the table."""
    start = log.stat().st_size if log.exists() else 0
    times, size, cpu = _one_client(path, cookie, args.runs, server)
    logged = _logged(log, start)
    median, p95 = _percentiles(times)
    loaded = _wrk(path, cookie, args.seconds, str(script))
    rate = loaded["requests"] / loaded["seconds"]
    return (
        f"{label:<22} {median:7.1f}ms {p95:7.1f}ms {cpu:8.1f}ms "
        f"{loaded['p50'] / 1000:7.1f}ms {loaded['p95'] / 1000:7.1f}ms {rate:8.1f} "
        f"{size / 1024:6.1f} {_queries(path):>8}"
        + (f"  ({loaded['errors']} errors)" if loaded["errors"] else "")
        + logged
    )


def _measure(args, env: dict) -> None:
    if not shutil.which("wrk"):
        raise SystemExit("wrk is missing: apt-get install -y wrk")
    work = Path(tempfile.mkdtemp())
    script, log = work / "report.lua", work / "access.log"
    script.write_text(WRK_SCRIPT)
    server = _start_server(args.server, env, log)
    try:
        cookie = _login("pat", "demo-pass-2026")
        print(f"\nserver: {args.server}; load average {os.getloadavg()[0]:.2f}")
        print(f"{'page':<22} {'1 client (wall, loopback)':>30} {'8 clients (wrk)':>28}")
        print(
            f"{'':<22} {'median':>9} {'p95':>9} {'CPU/req':>10} {'median':>9} {'p95':>9} "
            f"{'req/s':>8} {'KB':>6} {'queries':>8}"
        )
        for label, path in PAGES.items():
            print(_row(label, path, cookie, args, server, log, script), flush=True)
    finally:
        server.terminate()
        server.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reuse", action="store_true", help="measure the existing database")
    parser.add_argument("--runs", type=int, default=50, help="one-client requests per page")
    parser.add_argument("--seconds", type=int, default=10, help="wrk's duration per page")
    parser.add_argument(
        "--server",
        choices=["procfile", "wsgi"],
        default="procfile",
        help="procfile: the Procfile's web line (uvicorn workers, portal.asgi); "
        "wsgi: gunicorn's sync workers on portal.wsgi, the earlier command",
    )
    args = parser.parse_args()
    if not args.reuse:
        _fresh_database()
    env = dict(
        os.environ,
        DATABASE_URL=f"postgres://postgres@127.0.0.1:5432/{BENCH_DB}",
        PORTAL_VAR_DIR=str(ROOT / "var" / "orgscale"),
        ALLOWED_HOSTS="testserver,127.0.0.1,localhost",
        LOG_LEVEL="WARNING",
        DJANGO_SETTINGS_MODULE="portal.settings",
    )
    os.environ.update(env)
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    call_command("collectstatic", interactive=False, verbosity=0)
    if not args.reuse:
        _build(datetime.now(UTC))
    _measure(args, env)


if __name__ == "__main__":
    main()
