from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.db import transaction

from workspaces.catalog import CATALOG_FILES, read_catalog
from workspaces.models import SizeOffering


class Command(BaseCommand):
    help = (
        "Load the Azure GPU VM catalog (data/azure_gpu_vms.csv and the fractional sizes of "
        "data/azure_fractional_gpu_vms.csv) into SizeOffering; keeps offered."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--path", nargs="+", default=[str(p) for p in CATALOG_FILES])

    @transaction.atomic
    def handle(self, *args: Any, path: list[str], **options: Any) -> None:
        rows = read_catalog(*path)
        for row in rows:
            facts = {k: v for k, v in row.__dict__.items() if k not in ("vm_size", "region")}
            SizeOffering.objects.update_or_create(
                vm_size=row.vm_size, region=row.region, defaults=facts
            )
        self.stdout.write(f"Catalog: {len(rows)} GPU VM sizes by region from {', '.join(path)}")
