"""ARM error bodies, with the codes and message texts Azure uses.

A synchronous failure is raised as ArmError; a failure reported through an LRO is a plain
{"code", "message"} dict stored on the operation.
"""

import json
import urllib.parse

ALLOCATION_GUIDANCE = "Read more about improving likelihood of allocation success at http://aka.ms/allocation-guidance"
QUOTA_BLADE = "https://aka.ms/ProdportalCRP/#blade/Microsoft_Azure_Capacity/UsageAndQuota.ReactView"
SPOT_QUOTA_DOCS = (
    "https://docs.microsoft.com/en-us/azure/azure-portal/supportability/low-priority-quota"
)

_AKS = "Microsoft.ContainerService/managedClusters"

# Azure compute names its throttling buckets per operation group (AKS: per action).
THROTTLE_GROUPS = {
    "vm.create": "Microsoft.Compute/PutVM3Min",
    "vm.update": "Microsoft.Compute/PutVM3Min",
    "vm.get": "Microsoft.Compute/LowCostGet3Min",
    "vm.list": "Microsoft.Compute/HighCostGet3Min",
    "vm.delete": "Microsoft.Compute/DeleteVM3Min",
    "vm.start": "Microsoft.Compute/VMPostOperation3Min",
    "vm.deallocate": "Microsoft.Compute/VMPostOperation3Min",
    "vm.powerOff": "Microsoft.Compute/VMPostOperation3Min",
    "nic.create": "Microsoft.Network/networkInterfaces/write",
    "nic.delete": "Microsoft.Network/networkInterfaces/delete",
    "disk.delete": "Microsoft.Compute/DeleteDisks3Min",
    "operation.get": "Microsoft.Compute/GetOperation3Min",
    "usage.list": "Microsoft.Compute/GetSubscriptionInfo3Min",
    "sku.list": "Microsoft.Compute/GetSubscriptionInfo3Min",
    "aks.cluster.get": f"{_AKS}/read",
    "aks.pool.create": f"{_AKS}/agentPools/write",
    "aks.pool.delete": f"{_AKS}/agentPools/delete",
    "aks.pool.get": f"{_AKS}/agentPools/read",
    "aks.pool.list": f"{_AKS}/agentPools/read",
    "aks.credentials": f"{_AKS}/listClusterUserCredential/action",
}

# The RBAC action each op needs, for AuthorizationFailed messages.
ACTIONS = {
    "vm.create": "Microsoft.Compute/virtualMachines/write",
    "vm.update": "Microsoft.Compute/virtualMachines/write",
    "vm.get": "Microsoft.Compute/virtualMachines/read",
    "vm.sizes": "Microsoft.Compute/virtualMachines/vmSizes/read",
    "vm.list": "Microsoft.Compute/virtualMachines/read",
    "vm.delete": "Microsoft.Compute/virtualMachines/delete",
    "vm.start": "Microsoft.Compute/virtualMachines/start/action",
    "vm.deallocate": "Microsoft.Compute/virtualMachines/deallocate/action",
    "vm.powerOff": "Microsoft.Compute/virtualMachines/powerOff/action",
    "nic.create": "Microsoft.Network/networkInterfaces/write",
    "nic.delete": "Microsoft.Network/networkInterfaces/delete",
    "disk.delete": "Microsoft.Compute/disks/delete",
    "operation.get": "Microsoft.Compute/locations/operations/read",
    "usage.list": "Microsoft.Compute/locations/usages/read",
    "sku.list": "Microsoft.Compute/skus/read",
    "cost.query": "Microsoft.CostManagement/query/action",
    "aks.cluster.get": f"{_AKS}/read",
    "aks.pool.create": f"{_AKS}/agentPools/write",
    "aks.pool.delete": f"{_AKS}/agentPools/delete",
    "aks.pool.get": f"{_AKS}/agentPools/read",
    "aks.pool.list": f"{_AKS}/agentPools/read",
    "aks.credentials": f"{_AKS}/listClusterUserCredential/action",
}


class ArmError(Exception):
    """A synchronous ARM failure: HTTP status, error code, message, optional extra headers."""

    def __init__(self, status: int, code: str, message: str, headers: dict | None = None, **extra):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers or {}
        self.extra = extra

    def body(self) -> dict:
        """{"error": {"code", "message", "details": [], ...extra}}."""
        return {"error": {"code": self.code, "message": self.message, "details": [], **self.extra}}


def not_found(resource_type: str, name: str, resource_group: str) -> ArmError:
    """404 for a resource, e.g. resource_type "Microsoft.Network/networkInterfaces"."""
    message = (
        f"The Resource '{resource_type}/{name}' under resource group '{resource_group}' "
        "was not found."
    )
    return ArmError(404, "ResourceNotFound", message)


def invalid_parameter(message: str, target: str) -> ArmError:
    return ArmError(400, "InvalidParameter", message, target=target)


def generation_mismatch(size: str, generation: str) -> ArmError:
    """400 BadRequest: the image's Hyper-V generation is not one the size boots (Azure's
    wording for a Gen2 image on a Gen1-only size, and the reverse)."""
    number = generation.removeprefix("V")
    message = (
        f"The selected VM size '{size}' cannot boot Hypervisor Generation '{number}'. If this "
        "was a Create operation please check that the Hypervisor Generation of the Image "
        "matches the Hypervisor Generation of the selected VM Size."
    )
    return ArmError(400, "BadRequest", message)


def premium_storage_unsupported(size: str, disk: str) -> ArmError:
    """400 BadRequest: a Premium_LRS disk on a size whose resource SKU says PremiumIO False."""
    message = (
        "Requested operation cannot be performed because the VM size "
        f"{size} does not support the storage account type Premium_LRS of disk '{disk}'. "
        "Consider updating the VM to a size that supports Premium storage."
    )
    return ArmError(400, "BadRequest", message)


def sku_not_available(size: str, location: str) -> ArmError:
    """409 SkuNotAvailable, worded exactly as Azure words it."""
    message = (
        "The requested VM size for resource 'Following SKUs have failed for Capacity "
        f"Restrictions: {size}' is currently not available in location '{location}'. "
        "Please try another size or deploy to a different location or zones. "
        "See https://aka.ms/azureskunotavailable for details."
    )
    return ArmError(409, "SkuNotAvailable", message)


def _quota_url(subscription: str, family: str, location: str, new_limit: int) -> str:
    # The portal deep link Azure embeds: URL-encoded JSON naming the quota to raise.
    params = {
        "subscriptionId": subscription,
        "command": "openQuotaApprovalBlade",
        "quotas": [
            {
                "location": location,
                "providerId": "Microsoft.Compute",
                "resourceName": family,
                "quotaRequest": {
                    "properties": {"limit": new_limit, "unit": "Count", "name": {"value": family}}
                },
            }
        ],
    }
    encoded = urllib.parse.quote(json.dumps(params, separators=(",", ":")), safe=":,[]")
    return f"{QUOTA_BLADE}/Parameters/{encoded}"


def quota_exceeded(
    subscription: str, family: str, location: str, limit: int, usage: int, vcpus: int
) -> ArmError:
    """409 OperationNotAllowed; family "cores" reads as "Total Regional Cores" and
    "lowPriorityCores" (the Spot quota) as "LowPriorityCores", like Azure."""
    labels = {"cores": "Total Regional Cores", "lowprioritycores": "LowPriorityCores"}
    label = labels.get(family.lower(), f"{family} Cores")
    message = (
        f"Operation could not be completed as it results in exceeding approved {label} "
        "quota. Additional details - Deployment Model: Resource Manager, "
        f"Location: {location}, Current Limit: {limit}, Current Usage: {usage}, "
        f"Additional Required: {vcpus}, (Minimum) New Limit Required: {usage + vcpus}. "
        "Submit a request for Quota increase at "
        f"{_quota_url(subscription, family, location, usage + vcpus)} "
        "by specifying parameters listed in the \u2018Details\u2019 section for deployment to "
        "succeed."
    )
    if family.lower() == "lowprioritycores":
        message += f" Please read more about quota limits at {SPOT_QUOTA_DOCS}"
    return ArmError(409, "OperationNotAllowed", message)


def conflict(verb: str, running: str, name: str) -> ArmError:
    """409 Conflict: `verb` was refused because operation `running` is still in progress."""
    message = (
        f"Operation '{verb}' is not allowed since a conflicting operation '{running}' is in "
        f"progress on the resource '{name}'. Please retry after the operation completes."
    )
    return ArmError(409, "Conflict", message)


def allocation_failed(zonal: bool = False) -> dict:
    """LRO error {"code", "message"} for lack of capacity (region-wide or in a zone)."""
    if zonal:
        return {
            "code": "ZonalAllocationFailed",
            "message": "Allocation failed. We do not have sufficient capacity for the requested "
            f"VM size in this zone. {ALLOCATION_GUIDANCE}",
        }
    return {
        "code": "AllocationFailed",
        "message": "Allocation failed. We do not have sufficient capacity for the requested VM "
        f"size in this region. {ALLOCATION_GUIDANCE}",
    }


def throttled(op: str, retry_after: int) -> ArmError:
    """429 TooManyRequests with Retry-After in seconds, naming the op's throttling bucket."""
    group = THROTTLE_GROUPS.get(op, "Microsoft.Compute/HighCostGet3Min")
    message = (
        "The request is being throttled as the limit has been reached for operation group "
        f"{group}. Please see https://aka.ms/throttling for more details."
    )
    return ArmError(429, "TooManyRequests", message, {"Retry-After": str(retry_after)})


def authorization_failed(op: str, subscription: str) -> ArmError:
    """403 AuthorizationFailed: the caller's identity lacks the RBAC action `op` needs."""
    client = "00000000-0000-0000-0000-00000000c11e"
    message = (
        f"The client '{client}' with object id '{client}' does not have authorization to "
        f"perform action '{ACTIONS.get(op, op)}' over scope '/subscriptions/{subscription}' "
        "or the scope is invalid. If access was recently granted, please refresh your "
        "credentials."
    )
    return ArmError(403, "AuthorizationFailed", message)


def injected_conflict(op: str) -> ArmError:
    message = (
        f"Operation '{op}' is not allowed since a conflicting operation is in progress. "
        "Please retry later."
    )
    return ArmError(409, "Conflict", message)


def server_error() -> ArmError:
    message = "An internal execution error occurred. Please retry later."
    return ArmError(500, "InternalExecutionError", message)


def unavailable(retry_after: int) -> ArmError:
    """503 ServiceUnavailable with Retry-After in seconds."""
    message = "The service is temporarily unavailable. Please retry the request later."
    return ArmError(503, "ServiceUnavailable", message, {"Retry-After": str(retry_after)})


def missing_api_version() -> ArmError:
    message = "The api-version query parameter (?api-version=) is required for all requests."
    return ArmError(400, "MissingApiVersionParameter", message)


def invalid_content(detail: str) -> ArmError:
    message = f"The request content was invalid and could not be deserialized: '{detail}'."
    return ArmError(400, "InvalidRequestContent", message)


def invalid_resource_type(path: str) -> ArmError:
    message = f"The resource type could not be found for the request path '{path}'."
    return ArmError(404, "InvalidResourceType", message)


def method_not_allowed(method: str, path: str) -> ArmError:
    message = f"The requested method '{method}' is not allowed on '{path}'."
    return ArmError(405, "MethodNotAllowed", message)


# --- AKS (Microsoft.ContainerService): the codes and texts AKS answers with -------------------

AKS_NAMING = "https://aka.ms/aks-naming-rules"
AKS_PENDING = "https://aka.ms/aks-pending-operation"
AKS_SKUS = "https://aka.ms/aks/quotas-skus-regions"


def aks_pool_name_invalid() -> ArmError:
    """400 InvalidParameter for a pool name that is not 1-12 lowercase alphanumerics starting
    with a letter (AKS's wording, target agentPoolProfile.name)."""
    message = (
        "The value of parameter agentPoolProfile.name is invalid. "
        f"Please see {AKS_NAMING} for more details."
    )
    return ArmError(400, "InvalidParameter", message, target="agentPoolProfile.name")


def aks_busy(name: str, state: str, agentpool: bool = True) -> ArmError:
    """409 OperationNotAllowed: another operation on the pool (or, agentpool=False, on the
    cluster `name`) is running."""
    kind = "agentpool operation" if agentpool else "operation"
    message = (
        f"Operation is not allowed: Another {kind} ({name} - {state}) is in "
        "progress, please wait for it to finish before starting a new operation. "
        f"See {AKS_PENDING} for more details"
    )
    return ArmError(409, "OperationNotAllowed", message)


def aks_size_not_allowed(pool: str, location: str) -> ArmError:
    """400 BadRequest: the pool's VM size is not offered to the subscription in the location."""
    message = (
        f"The VM size of AgentPoolProfile:{pool} is not allowed in your subscription in "
        f"location '{location}'.  For more details, please visit {AKS_SKUS}"
    )
    return ArmError(400, "BadRequest", message)


def aks_insufficient_quota(family: str, location: str, needed: int, remaining: int) -> ArmError:
    """400 ErrCode_InsufficientVCPUQuota: the pool's nodes need more vCPUs than the family (or
    "cores", Total Regional) has left."""
    message = (
        f"Insufficient vcpu quota requested {needed}, remaining {max(remaining, 0)} for family "
        f"{family} for region {location}."
    )
    return ArmError(400, "ErrCode_InsufficientVCPUQuota", message)


def aks_property_change(name: str) -> ArmError:
    """400 PropertyChangeNotAllowed: vmSize and gpuInstanceProfile are fixed at pool creation."""
    message = f"Changing property '{name}' is not allowed."
    return ArmError(400, "PropertyChangeNotAllowed", message, target=name)
