"""manage.py entra_sync: run the Graph sync now (what beat runs every ENTRA_SYNC_SECONDS)."""

from dataclasses import asdict
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from teams.entra_sync import entra_sync


class Command(BaseCommand):
    help = "Sync memberships and disabled users from Microsoft Entra ID through Graph now."

    def handle(self, *args: Any, **options: Any) -> None:
        result = entra_sync(now=timezone.now())
        for name, value in asdict(result).items():
            self.stdout.write(f"{name}: {value}")
        if result.aborted:
            raise CommandError("Sync not run: Entra ID sign-in is off or Graph gave no token.")
