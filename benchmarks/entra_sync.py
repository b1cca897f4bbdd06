"""The Graph sync (teams.entra_sync) at the scale of an organisation, against the emulator.

Starts cloudsim in this process (as the tests' ``sim_server``), adds 2,000 users in 200 groups
of 10 through /_sim/entra/directory, and builds a throwaway database (SQLite by default,
PostgreSQL with --postgres) with 200 teams linked to those groups and the 2,000 portal
accounts (Profile.signin_object_id, as Entra ID sign-in leaves them) with their memberships.
Then it times:

1. a full sync with nothing to change;
2. after disabling 2 % of the users and taking another 2 % out of their group: the sync that
   deactivates and removes them (their workspaces: none here);
3. the steady state again.

It prints, per run, the wall time, the Graph calls the portal's client made (SyncResult, retries
included, the token not) and the changes. The emulator answers over loopback in microseconds,
so the times are the portal's own cost (HTTP client, JSON, SQL), not Graph's latency:
multiply the calls by Graph's ~50-150 ms per request for a real tenant.

    python benchmarks/entra_sync.py [--users 2000] [--groups 200] [--postgres]
"""

import argparse
import os
import secrets
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("SECRET_KEY", secrets.token_urlsafe(50))

ROOT = Path(__file__).resolve().parent.parent
PG = "postgres://postgres@127.0.0.1:5432/portal_bench_entra"


def _directory(control, users: int, groups: int) -> tuple[list[dict], list[dict]]:
    names = [f"r{i:05d}" for i in range(users)]
    per = users // groups
    answer = control.entra_add(
        users=[{"name": n} for n in names],
        groups=[
            {"display_name": f"Team {g:03d}", "members": names[g * per : (g + 1) * per]}
            for g in range(groups)
        ],
    )
    return answer["users"], answer["groups"]


def _portal(users: list[dict], groups: list[dict]) -> None:
    from django.contrib.auth import get_user_model

    from teams.models import Membership, Profile, Team

    teams = Team.objects.bulk_create(
        Team(name=f"Team {g:03d}", slug=f"team-{g:03d}", entra_group_id=group["id"])
        for g, group in enumerate(groups)
    )
    accounts = get_user_model().objects.bulk_create(
        get_user_model()(username=u["userPrincipalName"], email=u["userPrincipalName"])
        for u in users
    )
    Profile.objects.bulk_create(
        Profile(user=a, signin_object_id=u["id"], entra_object_id=u["id"])
        for a, u in zip(accounts, users, strict=True)
    )
    per = len(users) // len(groups)
    Membership.objects.bulk_create(
        Membership(team=teams[i // per], user=a) for i, a in enumerate(accounts)
    )


def _run(label: str) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    from teams.entra_sync import entra_sync

    with CaptureQueriesContext(connection) as queries:
        start = time.perf_counter()
        r = entra_sync(now=timezone.now())
        elapsed = time.perf_counter() - start
    assert not r.aborted and r.failures == 0, r
    print(
        f"{label:<28} {elapsed:6.2f} s  {r.graph_calls:5d} Graph calls  "
        f"{len(queries):6d} SQL  groups {r.groups_read}, users {r.users_checked}, "
        f"removed {r.members_removed}, deactivated {r.users_deactivated}"
    )


def main(args, server) -> None:
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connection

    from cloudsim.control import SimControl
    from cloudsim.entra.directory import DEMO_CLIENT_ID, DEMO_CLIENT_SECRET, TENANT_ID

    settings.ENTRA_TENANT_ID, settings.ENTRA_CLIENT_ID = TENANT_ID, DEMO_CLIENT_ID
    settings.ENTRA_CLIENT_SECRET = DEMO_CLIENT_SECRET
    settings.ENTRA_AUTHORITY = settings.ENTRA_GRAPH_ENDPOINT = server.url
    settings.DEBUG = False
    call_command("migrate", verbosity=0)
    control = SimControl(server.url)
    users, groups = _directory(control, args.users, args.groups)
    _portal(users, groups)
    print(f"{args.users} users in {args.groups} groups, {connection.vendor}:")
    _run("full sync, no changes")
    step = 50  # every 50th user: 2 %
    for u in users[::step]:
        control.entra_disable_user(u["id"])
    per = args.users // args.groups
    for i in range(step // 2, args.users, step):
        control.entra_remove_member(groups[i // per]["id"], users[i]["id"])
    _run("2 % disabled, 2 % removed")
    _run("steady state again")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--users", type=int, default=2_000)
    parser.add_argument("--groups", type=int, default=200)
    parser.add_argument("--postgres", action="store_true")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    with tempfile.TemporaryDirectory() as var_dir:
        url = PG if args.postgres else f"sqlite:///{var_dir}/bench.sqlite3"
        if args.postgres:
            import psycopg

            with psycopg.connect(PG.rsplit("/", 1)[0] + "/postgres", autocommit=True) as c:
                c.execute("DROP DATABASE IF EXISTS portal_bench_entra WITH (FORCE)")
                c.execute("CREATE DATABASE portal_bench_entra")
        os.environ.update(
            DJANGO_SETTINGS_MODULE="portal.settings", PORTAL_VAR_DIR=var_dir, DATABASE_URL=url
        )
        from cloudsim import start_server

        server = start_server(port=0, latency=0.05, retry_after=0)
        try:
            main(args, server)
        finally:
            server.shutdown()
