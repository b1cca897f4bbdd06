"""manage.py sync_prices: load Azure retail prices for the GPU catalog's sizes and regions
and the OS disk tier, from the Retail Prices API or, with --offline, from the snapshot."""

import json
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from billing.meters import OS_DISK_TIER
from billing.price_sync import offerings_reprice, prices_sync
from cloud import prices
from workspaces.catalog import read_catalog

SNAPSHOT = Path(settings.BASE_DIR) / "data" / "retail_prices_snapshot.json"


class Command(BaseCommand):
    help = "Sync Azure retail prices (Retail Prices API, or --offline: the shipped snapshot)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--offline", action="store_true", help=f"load {SNAPSHOT.name}")

    def handle(self, *args: Any, offline: bool = False, **options: Any) -> None:
        started = time.monotonic()
        source = "snapshot" if offline else "api"
        try:
            fetched = self._snapshot() if offline else self._api()
        except (prices.PriceFormatError, prices.PriceApiError, OSError) as exc:
            raise CommandError(f"Prices not synced; the old ones stay. {exc}") from exc
        now = timezone.now()
        result = prices_sync(prices=fetched, source=source, now=now)
        offerings = offerings_reprice(now=now)
        self.stdout.write(
            f"{len(fetched)} prices from the {source}: {result.added} added, "
            f"{result.unchanged} unchanged, {offerings.repriced} offerings repriced, "
            f"in {time.monotonic() - started:.2f} s"
        )
        for name in offerings.withdrawn:
            self.stdout.write(f"No longer offered, Azure has no price for it: {name}")

    def _snapshot(self) -> list[prices.RetailPrice]:
        page = json.loads(SNAPSHOT.read_text(), parse_float=Decimal)
        return prices.parse_page(page, where=SNAPSHOT.name)[0]

    def _api(self) -> list[prices.RetailPrice]:
        sizes: dict[str, set[str]] = {}
        for row in read_catalog():
            sizes.setdefault(row.region, set()).add(row.vm_size)
        filters = []
        for region, names in sorted(sizes.items()):
            filters += prices.vm_filters(region=region, arm_sku_names=sorted(names))
            filters += prices.disk_filters(region=region, sku_names=[OS_DISK_TIER])
            filters.append(prices.files_filter(region=region))  # team shares and homes
        return prices.fetch_prices(
            endpoint=settings.AZURE_PRICES_ENDPOINT,
            filters=filters,
            retry_total=settings.AZURE_RETRY_TOTAL,
        )
