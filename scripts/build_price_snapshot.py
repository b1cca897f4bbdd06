"""Build data/retail_prices_snapshot.json, the offline price snapshot `sync_prices --offline`
loads, from data/azure_gpu_vms.csv and data/azure_fractional_gpu_vms.csv (the fractional
NVadsA10 v5 sizes; see data/SOURCE.md).

The snapshot is a Retail Prices API page ({"BillingCurrency", "Items": [...]}) so the same
parser (cloud/prices.py) reads it: one Consumption item per size and region at the CSV's
pay-as-you-go price, a ' Spot' item where the CSV has a real Spot price (below
pay-as-you-go), the OS disk tier's price where one is known, and the Premium Files meters
(provisioned GiB and snapshot GiB a month) where a capture of the API gives them. The CSV
carries no dates: every item is effective from 2025-01-01, which covers all the portal's
history.

    python scripts/build_price_snapshot.py
"""

import csv
import json
import uuid
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EFFECTIVE = "2025-01-01T00:00:00Z"
# P10 LRS (128 GiB Premium SSD, every VM's OS disk) in East US: $19.71 per month, the
# Retail Prices API's "P10 LRS Disk" meter. Other regions get their price from an online sync.
DISKS = [("eastus", "19.71")]
# Azure Files premium (provisioned v1, the team shares and homes: NFS on a premium FileStorage
# account), product "Premium Files", sku "Premium LRS", per provisioned GiB a month and per
# snapshot GiB a month, as the Retail Prices API answered on 2026-07-24 in East US and East US 2
# (the capture in data/SOURCE.md, "Premium Files"). No other region was captured.
FILES = [
    (region, meter, price)
    for region in ("eastus", "eastus2")
    for meter, price in (("Premium LRS Provisioned", "0.16"), ("Premium LRS Snapshots", "0.136"))
]
CATALOGS = ("azure_gpu_vms.csv", "azure_fractional_gpu_vms.csv")


def _item(size: str, region: str, price: str, spot: bool) -> dict:
    name = size.removeprefix("Standard_").replace("_", " ") + (" Spot" if spot else "")
    return {
        "currencyCode": "USD",
        "tierMinimumUnits": 0.0,
        "retailPrice": Decimal(price),
        "unitPrice": Decimal(price),
        "armRegionName": region,
        "location": region,
        "effectiveStartDate": EFFECTIVE,
        "meterId": str(uuid.uuid5(uuid.NAMESPACE_URL, f"vm/{size}/{region}/{spot}")),
        "meterName": name,
        "productId": "",
        "skuId": "",
        "productName": f"Virtual Machines {size.split('_')[1]} Series",
        "skuName": name,
        "serviceName": "Virtual Machines",
        "serviceId": "DZH313Z7MMC8",
        "serviceFamily": "Compute",
        "unitOfMeasure": "1 Hour",
        "type": "Consumption",
        "isPrimaryMeterRegion": True,
        "armSkuName": size,
    }


def _disk(region: str, price: str) -> dict:
    return {
        **_item("Standard_P10", region, price, False),
        "meterId": str(uuid.uuid5(uuid.NAMESPACE_URL, f"disk/P10 LRS/{region}")),
        "meterName": "P10 LRS Disk",
        "productName": "Premium SSD Managed Disks",
        "skuName": "P10 LRS",
        "serviceName": "Storage",
        "serviceFamily": "Storage",
        "unitOfMeasure": "1/Month",
        "armSkuName": "",
    }


def _files(region: str, meter: str, price: str) -> dict:
    return {
        **_item("Standard_P10", region, price, False),
        "meterId": str(uuid.uuid5(uuid.NAMESPACE_URL, f"files/{meter}/{region}")),
        "meterName": meter,
        "productName": "Premium Files",
        "skuName": "Premium LRS",
        "serviceName": "Storage",
        "serviceFamily": "Storage",
        "unitOfMeasure": "1 GB/Month",
        "armSkuName": "",
    }


def items() -> list[dict]:
    out = []
    for name in CATALOGS:
        with open(ROOT / "data" / name, newline="") as f:
            out += [item for row in csv.DictReader(f) for item in _row_items(row)]
    return (
        out
        + [_disk(region, price) for region, price in DISKS]
        + [_files(region, meter, price) for region, meter, price in FILES]
    )


def _row_items(row: dict) -> list[dict]:
    """The pay-as-you-go item of a CSV row with a price, and its Spot item where the row has a
    real Spot price (below pay-as-you-go)."""
    if not row["Price"].strip():
        return []
    size, region, price = row["InstanceType"], row["Region"], row["Price"]
    out = [_item(size, region, price, spot=False)]
    spot = row["SpotPrice"].strip()
    if spot and Decimal(spot) < Decimal(price):
        out.append(_item(size, region, spot, spot=True))
    return out


def main() -> None:
    page = {
        "Source": "data/azure_gpu_vms.csv and data/azure_fractional_gpu_vms.csv (SkyPilot "
        "catalogs from the Azure Retail Prices API), the P10 LRS disk meter and the Premium Files "
        "meters; see data/SOURCE.md",
        "BillingCurrency": "USD",
        "CustomerEntityId": "Default",
        "CustomerEntityType": "Retail",
        "Items": items(),
        "NextPageLink": None,
    }
    page["Count"] = len(page["Items"])
    text = json.dumps(page, indent=1, default=str)
    (ROOT / "data" / "retail_prices_snapshot.json").write_text(_numbers(text) + "\n")


def _numbers(text: str) -> str:
    """Prices as JSON numbers with their exact digits (json.dumps would turn Decimal into a
    string)."""
    import re

    return re.sub(r'"(retailPrice|unitPrice)": "([0-9.]+)"', r'"\1": \2', text)


if __name__ == "__main__":
    main()
