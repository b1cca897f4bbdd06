from decimal import Decimal
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User, UserManager
from django.core.management import call_command
from django.core.management.base import BaseCommand
from django.db import transaction
from django.utils import timezone

from clusters.models import AksCluster, ClusterTeam, NodePool
from clusters.services import PoolRequest, pool_create, pool_resend_create
from environments.demo import seed_demo_environments
from teams.models import GpuQuota, Membership, Profile, Role, Team

DEMO_PASSWORD = "demo-pass-2026"
DEMO_TEAMS = {
    "Vision Lab": {"alice": Role.RESEARCHER, "victor": Role.TEAM_ADMIN},
    "NLP Group": {"bob": Role.RESEARCHER, "nora": Role.TEAM_ADMIN},
}
# USD per month. Vision Lab's fits a VM, a MIG slice and a 2-GPU namespace running for a whole
# month (about $11.54/h x 744 h = $8,586), so the demo can request all three at once without
# approval on any day of the month (tests/portal/test_demo.py).
# NLP Group's holds the demo workspaces with telemetry (billing.demo, ~$11.55/h) and a request
# of the same size again.
DEMO_BUDGETS = {"Vision Lab": Decimal("15000"), "NLP Group": Decimal("20000")}
# GPUs per model each demo team may hold without approval.
DEMO_QUOTAS = {
    "Vision Lab": {"A100": 4, "T4": 8, "A10": 2, "H100": 0},
    "NLP Group": {"A100": 8, "H100": 2, "T4": 4, "A10": 0},
}
PLATFORM_ADMIN = "pat"
# The demo AKS cluster (cloudsim creates it at start-up from CLOUDSIM_AKS_CLUSTER, see the
# Makefile) and its GPU node pools: name -> (VM size, GPU instance profile, nodes).
DEMO_CLUSTER = "research-aks"
DEMO_POOLS = {
    "mig1g": ("Standard_NC24ads_A100_v4", "MIG1g", 2),
    "mig3g": ("Standard_NC24ads_A100_v4", "MIG3g", 1),
    "a100": ("Standard_NC96ads_A100_v4", "", 1),
}
# Entra ID group object ids of the demo teams (Team.entra_group_id): the emulator's tenant has
# groups of these names and ids, and its Kubernetes RBAC knows them from the RoleBindings.
DEMO_GROUPS = {
    "Vision Lab": "0f6d3b2a-8c4e-4f1a-9b7d-2e5c6a7b8c01",
    "NLP Group": "1a7e4c3b-9d5f-4a2b-8c6e-3f4d5b6c7d02",
}


class Command(BaseCommand):
    help = "Create the demo teams and users (idempotent) and load the catalog."

    @transaction.atomic
    def handle(self, *args: Any, **options: Any) -> None:
        call_command("load_catalog", stdout=self.stdout)
        call_command("sync_prices", offline=True, stdout=self.stdout)
        users = get_user_model().objects
        for team_name, members in DEMO_TEAMS.items():
            team, _ = Team.objects.get_or_create(
                name=team_name,
                defaults={
                    "slug": team_name.lower().replace(" ", "-"),
                    "monthly_budget": DEMO_BUDGETS[team_name],
                },
            )
            if team.entra_group_id is None and team_name in DEMO_GROUPS:
                # The emulator's groups of the same name (cloudsim/entra/directory.py).
                team.entra_group_id = DEMO_GROUPS[team_name]
                team.entra_group_name = team_name
                team.save(update_fields=["entra_group_id", "entra_group_name"])
            for gpu_model, gpus in DEMO_QUOTAS[team_name].items():
                GpuQuota.objects.get_or_create(
                    team=team, gpu_model=gpu_model, defaults={"gpus": gpus}
                )
            for username, role in members.items():
                user = self._user(users, username, staff=False)
                Membership.objects.update_or_create(team=team, user=user, defaults={"role": role})
        admin = self._user(users, PLATFORM_ADMIN, staff=True)
        self._cluster(admin)
        seed_demo_environments(now=timezone.now())
        # NLP Group's workspaces with a week of telemetry, so right-sizing shows at once.
        call_command("seed_demo_telemetry", stdout=self.stdout)
        self.stdout.write(
            "Demo logins (password "
            f"{DEMO_PASSWORD}): alice, bob (researchers), victor, nora (team admins), "
            f"{PLATFORM_ADMIN} (platform admin)"
        )

    def _cluster(self, admin: User) -> None:
        """The demo cluster, its teams and pools. The emulator starts empty each time, so
        every pool's create is sent again (an idempotent PUT) for the worker to carry out."""
        now = timezone.now()
        cluster, _ = AksCluster.objects.get_or_create(
            subscription_id=settings.AZURE_SUBSCRIPTION_ID,
            resource_group=settings.AZURE_RESOURCE_GROUP,
            name=DEMO_CLUSTER,
            defaults={
                "location": "eastus",
                "kubernetes_version": "1.33.2",
                "registered_by": admin,
                "registered_at": now,
            },
        )
        for team in Team.objects.filter(name__in=DEMO_GROUPS):
            ClusterTeam.objects.get_or_create(
                cluster=cluster, team=team, defaults={"namespace": f"team-{team.slug}"}
            )
        for name, (vm_size, profile, nodes) in DEMO_POOLS.items():
            pool = NodePool.objects.filter(cluster=cluster, name=name).first()
            if pool is None:
                ask = PoolRequest(
                    name=name,
                    vm_size=vm_size,
                    gpu_instance_profile=profile,
                    node_count=nodes,
                    taints=("sku=gpu:NoSchedule",),
                )
                pool_create(actor=admin, cluster=cluster, ask=ask, now=now)
            else:
                pool_resend_create(pool=pool, now=now)

    def _user(self, users: UserManager[User], username: str, *, staff: bool) -> User:
        user, created = users.get_or_create(
            username=username,
            defaults={"email": f"{username}@example.org", "is_staff": staff, "is_superuser": staff},
        )
        if created:
            user.set_password(DEMO_PASSWORD)
            user.save()
        # Their Entra ID UPN (made up), so their MIG slices' owner RoleBindings name them.
        Profile.objects.get_or_create(user=user, defaults={"entra_upn": user.email})
        return user
