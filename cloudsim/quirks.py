"""Answers Azure may give that the emulator does not give by default, switched on per call or
for every call, so the portal's handling of each is tested (docs/emulator.md, "Azure details").

Create without an async header. Azure's PUT that creates a VM, a NIC or an AKS agent pool may
answer 201 with no Azure-AsyncOperation (and no Location) header; the SDK then polls the
resource itself until its properties.provisioningState is terminal (ARM's RPC "201 Created
with provisioningState", see Azure/azure-resource-manager-rpc async-api-reference). Chosen:
  - per call: a fault of kind "no_async_header" for op vm.create, nic.create or aks.pool.create
    (POST /_sim/faults), taken by the next such create;
  - at random: POST /_sim/quirks {"no_async_header_rate": 0..1, "seed": int}, or the settings
    CLOUDSIM_NO_ASYNC_HEADER_RATE and CLOUDSIM_SEED in the environment (the startup default
    that /_sim/reset restores). The same seed gives the same sequence of answers.

Location display names. Azure may report a resource's location as its display name ("West US
2") where the portal stores "westus2". POST /_sim/quirks {"display_locations": true} makes VM,
AKS cluster and resource SKU answers carry display names.
"""

from __future__ import annotations

import os
import random
from typing import TYPE_CHECKING

from .protocol import Request, Response, lro_headers

if TYPE_CHECKING:  # cloud.py builds a Quirks on every reset, so no import back at run time.
    from .cloud import Cloud
    from .models import Operation

NO_ASYNC_HEADER = "no_async_header"
CREATE_OPS = frozenset({"vm.create", "nic.create", "aks.pool.create"})
FAULT_KINDS = frozenset({NO_ASYNC_HEADER})

# Microsoft's display names of the locations the catalog offers (az account list-locations).
DISPLAY_NAMES = {
    "centralus": "Central US",
    "eastus": "East US",
    "eastus2": "East US 2",
    "northcentralus": "North Central US",
    "southcentralus": "South Central US",
    "westus": "West US",
    "westus2": "West US 2",
    "westus3": "West US 3",
}


class Quirks:
    """The switches, on a Cloud as `cloud.quirks`; reset() restores the startup settings."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.display_locations = False
        self.no_async_header_rate = _rate(os.environ.get("CLOUDSIM_NO_ASYNC_HEADER_RATE", "0"))
        self.seed = int(os.environ.get("CLOUDSIM_SEED", "0"))
        self.random = random.Random(self.seed)

    def settings(self) -> dict:
        return {
            "display_locations": self.display_locations,
            "no_async_header_rate": self.no_async_header_rate,
            "seed": self.seed,
        }


def _rate(value: object) -> float:
    rate = float(value)  # type: ignore[arg-type]
    if not 0 <= rate <= 1:
        raise ValueError(f"a rate is between 0 and 1, not {rate}")
    return rate


def shown_location(cloud: Cloud, location: str) -> str:
    """The location as the emulator reports it: its name, or its display name when asked."""
    if cloud.quirks.display_locations:
        return DISPLAY_NAMES.get(location, location)
    return location


def create_headers(cloud: Cloud, req: Request, op: Operation, fault_op: str) -> dict:
    """The headers of a create's 201: Azure-AsyncOperation and Retry-After, or none at all
    (the SDK then polls the resource's provisioningState), per call or at random."""
    fault = cloud.take_fault(fault_op, FAULT_KINDS)
    quirks = cloud.quirks
    if fault is not None or (
        quirks.no_async_header_rate and quirks.random.random() < quirks.no_async_header_rate
    ):
        return {}
    return lro_headers(req, op, cloud.retry_after, location=False)


# --- control ---------------------------------------------------------------------------------


def set_quirks(cloud: Cloud, body: dict) -> Response:
    """POST /_sim/quirks {"display_locations"?: bool, "no_async_header_rate"?: 0..1,
    "seed"?: int} -> the settings now."""
    from .control_api import _bad, _field  # The control API's validation, shared.

    quirks = cloud.quirks
    quirks.display_locations = _field(body, "display_locations", bool, quirks.display_locations)
    rate = _field(body, "no_async_header_rate", (int, float), quirks.no_async_header_rate)
    try:
        quirks.no_async_header_rate = _rate(rate)
    except ValueError as exc:
        raise _bad(str(exc)) from None
    if "seed" in body:
        quirks.seed = _field(body, "seed", int)
        quirks.random = random.Random(quirks.seed)
    return Response(200, quirks.settings())


def get_quirks(cloud: Cloud, body: dict) -> Response:
    return Response(200, cloud.quirks.settings())


ROUTES = {("POST", "/_sim/quirks"): set_quirks, ("GET", "/_sim/quirks"): get_quirks}
