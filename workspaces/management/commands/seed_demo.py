from decimal import Decimal

from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand
from django.db import transaction

from teams.models import GpuQuota, Membership, Role, Team

DEMO_PASSWORD = "demo-pass-2026"
DEMO_TEAMS = {
    "Vision Lab": {"alice": Role.RESEARCHER, "victor": Role.TEAM_ADMIN},
    "NLP Group": {"bob": Role.RESEARCHER, "nora": Role.TEAM_ADMIN},
}
# USD per month.
DEMO_BUDGETS = {"Vision Lab": Decimal("5000"), "NLP Group": Decimal("8000")}
# GPUs per model each demo team may hold without approval.
DEMO_QUOTAS = {
    "Vision Lab": {"A100": 4, "T4": 8, "A10": 2, "H100": 0},
    "NLP Group": {"A100": 8, "H100": 2, "T4": 4, "A10": 0},
}
PLATFORM_ADMIN = "pat"


class Command(BaseCommand):
    help = "Create the demo teams and users (idempotent) and load the catalog."

    @transaction.atomic
    def handle(self, *args, **options):
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
            for gpu_model, gpus in DEMO_QUOTAS[team_name].items():
                GpuQuota.objects.get_or_create(
                    team=team, gpu_model=gpu_model, defaults={"gpus": gpus}
                )
            for username, role in members.items():
                user = self._user(users, username, staff=False)
                Membership.objects.update_or_create(team=team, user=user, defaults={"role": role})
        self._user(users, PLATFORM_ADMIN, staff=True)
        self.stdout.write(
            "Demo logins (password "
            f"{DEMO_PASSWORD}): alice, bob (researchers), victor, nora (team admins), "
            f"{PLATFORM_ADMIN} (platform admin)"
        )

    def _user(self, users, username, *, staff):
        user, created = users.get_or_create(
            username=username,
            defaults={"email": f"{username}@example.org", "is_staff": staff, "is_superuser": staff},
        )
        if created:
            user.set_password(DEMO_PASSWORD)
            user.save()
        return user
