"""Subscription-level compute/network endpoints: operation status, usages, resource SKUs."""

import re

from . import faults, quirks, views
from .cloud import SPOT_QUOTA, Cloud
from .errors import ArmError
from .models import Operation
from .protocol import Request, Response, operation_url
from .skus import SizeInfo, family_display_name, normalize_location


def get_operation(cloud: Cloud, req: Request) -> Response:
    """Azure-AsyncOperation status (200 {"name","status","startTime",...}), or the Location
    monitor (`operationResults/{id}` or `?monitor=true`): 202 while running, then the op's
    final answer (200 empty / 204), or its error body with 400 if it failed."""
    faults.raise_injected(cloud, "operation.get")
    op = cloud.operations.get(req.params["opid"].lower())
    if op is None:
        message = f"The operation '{req.params['opid']}' was not found."
        raise ArmError(404, "ResourceNotFound", message)
    if req.params.get("monitor") or req.query.get("monitor", "").lower() == "true":
        return _monitor(cloud, req, op)
    headers = {"Retry-After": str(cloud.retry_after)} if op.status == "InProgress" else {}
    return Response(200, views.operation_body(op), headers)


def _monitor(cloud: Cloud, req: Request, op: Operation) -> Response:
    if op.status == "InProgress":
        location = operation_url(req, op, monitor=True)
        return Response(202, None, {"Location": location, "Retry-After": str(cloud.retry_after)})
    if op.status == "Failed" and op.error:
        body = {"error": {**op.error, "details": []}}
        return Response(400, body, {"x-ms-error-code": op.error["code"]})
    return Response(op.done_status)


def _usage(cloud: Cloud, location: str, family: str, label: str) -> dict:
    return {
        "unit": "Count",
        "currentValue": cloud.usage(location, family),
        "limit": cloud.quota_limit(location, family),
        "name": {"value": family, "localizedValue": label},
    }


def list_usages(cloud: Cloud, req: Request) -> Response:
    """{"value": [cores, lowPriorityCores (the Spot VMs' own regional quota), then one entry
    per quota family the location offers]}; vCPU counts include deallocated VMs, as Azure's
    do, and a Spot VM counts in lowPriorityCores only."""
    faults.raise_injected(cloud, "usage.list", req.params["sub"])
    location = normalize_location(req.params["loc"])
    entries = [_usage(cloud, location, "cores", "Total Regional vCPUs")]
    entries.append(_usage(cloud, location, SPOT_QUOTA, "Total Regional Low-priority vCPUs"))
    for family in cloud.catalog.families_in(location):
        entries.append(_usage(cloud, location, family, family_display_name(family)))
    return Response(200, {"value": entries})


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _sku(cloud: Cloud, location: str, info: SizeInfo) -> dict:
    restrictions = []
    shown = quirks.shown_location(cloud, location)
    if (location, info.name.lower()) in cloud.restricted:
        restrictions.append(
            {
                "type": "Location",
                "values": [shown],
                "restrictionInfo": {"locations": [shown]},
                "reasonCode": "NotAvailableForSubscription",
            }
        )
    capabilities = [("vCPUs", str(info.vcpus)), ("MemoryGB", _number(info.memory_gb))]
    capabilities += [("GPUs", str(info.gpus)), ("LowPriorityCapable", "True")]
    # As Azure lists them: "V1,V2" and "True"/"False" strings.
    capabilities += [("HyperVGenerations", ",".join(info.generations))]
    capabilities += [("PremiumIO", str(info.premium_io))]
    return {
        "resourceType": "virtualMachines",
        "name": info.name,
        "tier": "Standard",
        "size": info.name.removeprefix("Standard_"),
        "family": info.family,
        "locations": [shown],
        "locationInfo": [{"location": shown, "zones": ["1", "2", "3"], "zoneDetails": []}],
        "capabilities": [{"name": n, "value": v} for n, v in capabilities],
        "restrictions": restrictions,
    }


def list_skus(cloud: Cloud, req: Request) -> Response:
    """{"value": [one virtualMachines SKU per (size, location)]}; honours
    `$filter=location eq 'eastus'` (the only filter ARM supports here)."""
    faults.raise_injected(cloud, "sku.list", req.params["sub"])
    match = re.search(r"location\s+eq\s+'([^']*)'", req.query.get("$filter", ""), re.IGNORECASE)
    locations = [normalize_location(match.group(1))] if match else cloud.catalog.locations()
    value = [_sku(cloud, loc, info) for loc in locations for info in cloud.catalog.in_location(loc)]
    return Response(200, {"value": value})
