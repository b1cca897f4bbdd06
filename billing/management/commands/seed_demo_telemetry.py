from django.core.management.base import BaseCommand
from django.utils import timezone

from billing.demo import demo_telemetry_seed


class Command(BaseCommand):
    help = "Demo workspaces with a week of telemetry, and their right-sizing advice (billing.demo)."

    def handle(self, *args: object, **options: object) -> None:
        seeded = demo_telemetry_seed(now=timezone.now())
        names = ", ".join(w.name for w in seeded) or "none"
        self.stdout.write(f"Demo telemetry: a week for {names}; right-sizing refreshed")
