"""`make run`: Vision Lab gets a storage quota and a "datasets" share, read-only for
researchers (run after seed_demo; idempotent). The share is made in Azure by the worker once it
runs; the emulator, with CLOUDSIM_DEMO_DATASET=1, fills a new "datasets" share with a small
sample dataset (cloudsim/storage_state.py), as a team admin would copy one in."""

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.utils import timezone

from storage import services
from storage.models import Access, TeamShare, TeamStorage
from teams.models import Team

DEMO_TEAM, DEMO_ADMIN = "Vision Lab", "victor"
DEMO_QUOTA_GIB = 4096


class Command(BaseCommand):
    help = "Give the demo team a storage quota and a datasets share (idempotent)."

    def handle(self, *args: Any, **options: Any) -> None:
        team = Team.objects.filter(name=DEMO_TEAM).first()
        admin = get_user_model().objects.filter(username=DEMO_ADMIN).first()
        if team is None or admin is None:
            self.stderr.write("Run seed_demo first.")
            return
        storage, _ = TeamStorage.objects.get_or_create(team=team)
        if storage.quota_gib < DEMO_QUOTA_GIB:
            storage.quota_gib = DEMO_QUOTA_GIB
            storage.save(update_fields=["quota_gib"])
        if TeamShare.objects.filter(team=team, name="datasets", deleted_at__isnull=True).exists():
            return
        services.share_create(
            user=admin,
            team=team,
            name="datasets",
            size_gib=1024,
            researcher_access=Access.READ_ONLY,
            now=timezone.now(),
        )
        self.stdout.write(f"{DEMO_TEAM}: share datasets (1024 GiB, read-only for researchers).")
