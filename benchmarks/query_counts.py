"""SQL queries per page with 10 and with 1,000 pending requests above quota.

Builds a fresh SQLite database with the demo data, adds pending requests (workspaces waiting
for approval, spread over both demo teams), and counts the queries each page makes for a
platform admin. The counts must not grow with the number of requests.

    python benchmarks/query_counts.py
"""

import os
import secrets
import sys
import tempfile
from datetime import timedelta
from pathlib import Path

# Outside the embedded default the portal refuses to start without SECRET_KEY
# (portal/secret_key.py): every process this benchmark starts inherits this one.
os.environ.setdefault("SECRET_KEY", secrets.token_urlsafe(50))

ROOT = Path(__file__).resolve().parent.parent
# URL name -> URL kwargs.
PAGES = {
    "approvals": {},
    "team-list": {},
    "team-detail": {"slug": "vision-lab"},
    "workspaces:request": {},
    "workspaces:list": {},
}


def _add_pending(count: int) -> None:
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from teams.models import QuotaRequest, Team
    from workspaces.models import SizeOffering, Workspace

    offering = SizeOffering.objects.get(vm_size="Standard_NC24ads_A100_v4", region="eastus")
    teams = list(Team.objects.all())
    users = {u.username: u for u in get_user_model().objects.all()}
    owners = {teams[0].pk: users["alice"], teams[1].pk: users["bob"]}
    now = timezone.now()
    workspaces = Workspace.objects.bulk_create(
        [
            _pending_workspace(teams[i % 2], owners[teams[i % 2].pk], offering, now)
            for i in range(count)
        ]
    )
    QuotaRequest.objects.bulk_create(
        [
            QuotaRequest(
                team_id=w.team_id,
                requester_id=w.owner_id,
                workspace=w,
                summary=f"{offering.vm_size} in {offering.region}",
                over_quota=["benchmark"],
                justification="benchmark",
                price_per_hour=offering.price_per_hour,
                created_at=now,
                expires_at=now + timedelta(days=7),
            )
            for w in workspaces
        ]
    )


def _pending_workspace(team, owner, offering, now):
    import uuid

    from workspaces.models import Workspace
    from workspaces.states import Status

    return Workspace(
        kind="vm",
        team=team,
        owner=owner,
        name="bench",
        status=Status.PENDING_APPROVAL,
        status_changed_at=now,
        vm_size=offering.vm_size,
        region=offering.region,
        price_per_hour=offering.price_per_hour,
        gpu_model=offering.gpu_model,
        gpu_count=offering.gpu_count,
        ssh_user="researcher",
        ssh_public_key="ssh-ed25519 AAAA bench",
        request_key=uuid.uuid4(),
        created_at=now,
        updated_at=now,
    )


def _count(client, name: str, kwargs: dict) -> int | None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from django.urls import NoReverseMatch, reverse

    try:
        url = reverse(name, kwargs=kwargs)
    except NoReverseMatch:
        return None
    with CaptureQueriesContext(connection) as queries:
        status = client.get(url).status_code
    if status != 200:
        raise RuntimeError(f"{url} answered {status}")
    return len(queries)


def main() -> None:
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client

    from teams.models import Membership, QuotaRequest, Team

    call_command("migrate", verbosity=0)
    with open(os.devnull, "w") as quiet:
        call_command("seed_demo", stdout=quiet)
    admin = get_user_model().objects.get(username="pat")
    # A member too, so the request form and the list show a team of theirs.
    Membership.objects.get_or_create(team=Team.objects.first(), user=admin)
    client = Client()
    client.force_login(admin)
    counts = {}
    for total in (10, 1000):
        _add_pending(total - QuotaRequest.objects.count())
        counts[total] = {name: _count(client, name, kw) for name, kw in PAGES.items()}
    for name in PAGES:
        if counts[10][name] is None:
            continue
        print(
            f"{name:22} queries with 10 pending: {counts[10][name]:3}"
            f"  with 1000: {counts[1000][name]:3}"
        )


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as var_dir:
        os.environ.update(
            DJANGO_SETTINGS_MODULE="portal.settings",
            PORTAL_VAR_DIR=var_dir,
            DATABASE_URL=f"sqlite:///{var_dir}/bench.sqlite3",
            ALLOWED_HOSTS="testserver",
        )
        sys.path.insert(0, str(ROOT))
        main()
