"""Constants and helpers shared by the Azure adapter tests."""

import time

from cloud.azure_vm import VmState, poll

SUBSCRIPTION = "00000000-0000-0000-0000-000000000000"
RESOURCE_GROUP = "rg-portal"
SUBNET_ID = (
    f"/subscriptions/{SUBSCRIPTION}/resourceGroups/{RESOURCE_GROUP}/providers/"
    "Microsoft.Network/virtualNetworks/portal-vnet/subnets/workspaces"
)
WORKSPACE_ID = "3f2b8c1e-9a4d-4e5f-8b6a-1c2d3e4f5a6b"
T4 = "Standard_NC4as_T4_v3"  # 4 vCPUs, quota family standardNCASv3_T4Family, in eastus.
T4_FAMILY = "standardNCASv3_T4Family"


def arm_requests(control, method: str | None = None, contains: str = "") -> list[dict]:
    """Logged ARM requests, optionally only one method and paths containing `contains`."""
    return [
        r
        for r in control.requests()
        if (method is None or r["method"] == method) and contains.lower() in r["path"].lower()
    ]


def resume(settings, operation: str, *, name: str, token: str) -> VmState | None:
    """Poll the operation behind ``token`` until done, as the portal's task does across
    re-queued runs; returns what poll() returns once done. Raises what poll() raises."""
    while not (progress := poll(settings, operation, name=name, token=token)).done:
        time.sleep(settings.polling_interval)
    return progress.state
