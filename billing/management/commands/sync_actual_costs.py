"""manage.py sync_actual_costs: fetch Azure's actual costs per workspace tag and UTC day from
Cost Management (what the nightly beat task does), for reconciliation with the estimate."""

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from billing.actual_costs import ACTUAL_COST_DAYS, actual_costs_sync
from cloud.costs import CostFormatError
from cloud.errors import CloudError


class Command(BaseCommand):
    help = "Fetch Azure's actual costs (Cost Management) of this month and the last days."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--days",
            type=int,
            default=ACTUAL_COST_DAYS,
            help=f"complete UTC days to fetch again at least (default {ACTUAL_COST_DAYS})",
        )

    def handle(self, *args: Any, days: int = ACTUAL_COST_DAYS, **options: Any) -> None:
        try:
            result = actual_costs_sync(now=timezone.now(), days=days)
        except (CloudError, CostFormatError, ValueError) as exc:
            raise CommandError(f"Actual costs not synced; the old ones stay. {exc}") from exc
        self.stdout.write(
            f"Azure actual costs {result.first} to {result.last} (UTC): {result.rows} rows, "
            f"${result.total:,.2f}, of which ${result.unattributed:,.2f} not attributed to a "
            "workspace"
        )
