"""Regional quota usage and SKU restrictions, read through the real SDK."""

from cloud.azure_vm import Usage, begin, regional_usage, sku_info, vm_names

from .support import T4, T4_FAMILY, resume


def usage_of(azure, name: str) -> Usage:
    return next(u for u in regional_usage(azure, location="eastus") if u.name == name)


def test_regional_usage_lists_regional_and_family_quotas(azure):
    usages = regional_usage(azure, location="eastus")

    names = {u.name for u in usages}
    assert {"cores", T4_FAMILY, "standardNCADSA100v4Family"} <= names
    assert usage_of(azure, "cores").localized_name == "Total Regional vCPUs"
    assert all(u.unit == "Count" and u.current_value == 0 for u in usages)


def test_regional_usage_counts_workspaces_and_follows_quota_changes(azure, control, spec):
    name = vm_names(spec.workspace_id).vm
    resume(azure, "create", name=name, token=begin(azure, "create", name=name, spec=spec))
    control.set_quota("eastus", T4_FAMILY, 8)

    family = usage_of(azure, T4_FAMILY)

    assert (family.current_value, family.limit) == (4, 8)
    assert usage_of(azure, "cores").current_value == 4


def test_offered_size_is_available(azure):
    offered = sku_info(azure, location="eastus", vm_size=T4)
    assert (offered.offered, offered.reason) == (True, None)
    assert sku_info(azure, location="East US", vm_size=T4.lower()).offered


def test_restricted_size_reports_azures_reason(azure, control):
    control.restrict_sku("eastus", T4)

    restricted = sku_info(azure, location="eastus", vm_size=T4)

    assert (restricted.offered, restricted.reason) == (False, "NotAvailableForSubscription")
    assert type(restricted.reason) is str
    assert sku_info(azure, location="westus2", vm_size=T4).offered


def test_size_not_sold_in_the_location_is_not_offered(azure):
    unknown = sku_info(azure, location="eastus", vm_size="Standard_D2s_v5")

    assert (unknown.offered, unknown.reason) == (False, "NotOffered")
