from typing import Any

from django.core.management.base import BaseCommand

from clusters.backends.mig import slice_access_refresh_all


class Command(BaseCommand):
    help = (
        "Give every MIG slice's owner their Role and RoleBinding as their Entra ID identity is "
        "now, and drop the team's edit binding the slices' namespaces had before (run once "
        "after upgrading; slices also get it on their next create or start)."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        done = slice_access_refresh_all()
        for workspace_id, outcome in done.items():
            self.stdout.write(f"{workspace_id}: {outcome}")
        failed = sum(1 for outcome in done.values() if outcome != "ok")
        self.stdout.write(f"MIG slices: {len(done) - failed} brought up to date, {failed} failed")
