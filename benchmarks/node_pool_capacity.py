"""SQL queries of the node pool capacity pages with 10 and with 100 node pools.

Builds a fresh SQLite database with the demo data, adds AKS node pools (MIG and whole-GPU, on
one cluster) with MIG slice and namespace workspaces on each, and counts the queries and the
server time of the platform admin's capacity pages (all clusters, and the cluster's page). The
count must be the same with 10 and with 100 pools.

    python benchmarks/node_pool_capacity.py
"""

import os
import secrets
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

# Outside the embedded default the portal refuses to start without SECRET_KEY
# (portal/secret_key.py): every process this benchmark starts inherits this one.
os.environ.setdefault("SECRET_KEY", secrets.token_urlsafe(50))

ROOT = Path(__file__).resolve().parent.parent
ROUNDS = 20


def _add_pools(cluster, upto: int) -> None:
    """Pools up to ``upto``, each with three running MIG slices or a 2-GPU namespace."""
    from django.utils import timezone

    from clusters.models import NodePool, PoolStatus

    now = timezone.now()
    start = cluster.pools.count()
    pools = NodePool.objects.bulk_create(
        [
            NodePool(
                cluster=cluster,
                name=f"bench{i}",
                vm_size="Standard_NC24ads_A100_v4" if i % 2 else "Standard_NC96ads_A100_v4",
                gpu_model="A100",
                gpus_per_node=1 if i % 2 else 4,
                gpu_memory_gib=80,
                gpu_instance_profile="MIG1g" if i % 2 else "",
                node_count=2,
                price_per_hour="3.6730" if i % 2 else "14.6920",
                status=PoolStatus.READY,
                created_at=now,
                updated_at=now,
            )
            for i in range(start, upto)
        ]
    )
    _add_workspaces(pools, now)


def _add_workspaces(pools, now) -> None:
    from django.contrib.auth import get_user_model

    from teams.models import Team
    from workspaces.models import Workspace
    from workspaces.states import Status

    team, owner = (
        Team.objects.get(slug="vision-lab"),
        get_user_model().objects.get(username="alice"),
    )
    rows = []
    for pool in pools:
        mig = bool(pool.gpu_instance_profile)
        for _ in range(3 if mig else 1):
            rows.append(
                Workspace(
                    team=team,
                    owner=owner,
                    name="bench",
                    kind="mig" if mig else "namespace",
                    status=Status.RUNNING,
                    status_changed_at=now,
                    vm_size=pool.vm_size,
                    region="eastus",
                    price_per_hour="0.5247",
                    gpu_model="A100",
                    gpu_count=0 if mig else 2,
                    gpu_slices=1 if mig else 0,
                    mig_profile="1g.10gb" if mig else "",
                    node_pool=pool,
                    namespace="team-vision",
                    request_key=uuid.uuid4(),
                    created_at=now,
                    updated_at=now,
                )
            )
    Workspace.objects.bulk_create(rows)


def _measure(client, url: str) -> tuple[int, float]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
    count = len(queries)  # Read now: later requests reset the connection's query log.
    if response.status_code != 200:
        raise RuntimeError(f"{url} answered {response.status_code}")
    times = []
    for _ in range(ROUNDS):
        began = time.perf_counter()
        client.get(url)
        times.append((time.perf_counter() - began) * 1000)
    return count, statistics.median(times)


def main() -> None:
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client
    from django.urls import reverse

    from clusters.models import AksCluster

    call_command("migrate", verbosity=0)
    with open(os.devnull, "w") as quiet:
        call_command("seed_demo", stdout=quiet)
    cluster = AksCluster.objects.get()
    client = Client()
    client.force_login(get_user_model().objects.get(username="pat"))
    pages = {
        "all clusters": reverse("clusters:list"),
        "cluster page": reverse("clusters:detail", kwargs={"pk": cluster.pk}),
    }
    for pools in (10, 100):
        _add_pools(cluster, pools)
        for name, url in pages.items():
            queries, median = _measure(client, url)
            print(f"{name:13} with {pools:3} pools: {queries:2} queries, median {median:6.1f} ms")


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
