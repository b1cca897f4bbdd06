"""The emulated Cost Management Query API: daily actual cost per workspace tag, worked out from
the lifetimes of VMs and disks the emulator ran, with its knobs, paging and faults."""

from datetime import UTC, datetime, timedelta

import pytest
import time_machine

from cloudsim import SimControlError

from .conftest import A100, RG, SUB, nic_id

QUERY = "/providers/Microsoft.CostManagement/query"
API = "2022-10-01"
T0 = datetime(2025, 11, 2, 20, 0, tzinfo=UTC)


def _price(sku_name: str, price: float, **item) -> dict:
    base = {
        "currencyCode": "USD",
        "tierMinimumUnits": 0.0,
        "retailPrice": price,
        "unitPrice": price,
        "armRegionName": "eastus",
        "effectiveStartDate": "2024-01-01T00:00:00Z",
        "meterId": sku_name,
        "meterName": sku_name,
        "productName": "Virtual Machines NCads A100 v4 Series",
        "skuName": sku_name,
        "serviceName": "Virtual Machines",
        "unitOfMeasure": "1 Hour",
        "type": "Consumption",
        "armSkuName": A100,
    }
    return {**base, **item}


DISK = {"serviceName": "Storage", "productName": "Premium SSD Managed Disks", "armSkuName": ""}
BOOK = [
    _price("NC24ads A100 v4", 3.00),
    _price("NC24ads A100 v4 Spot", 0.90),
    _price("NC24ads A100 v4", 9.99, productName="Virtual Machines NCads A100 v4 Series Windows"),
    _price("P10 LRS", 19.71, meterName="P10 LRS Disk", unitOfMeasure="1/Month", **DISK),
]


def query(days=("2025-11-02", "2025-11-03"), **dataset) -> dict:
    """A QueryDefinition as azure-mgmt-costmanagement serialises the portal's."""
    body = {
        "type": "ActualCost",
        "timeframe": "Custom",
        "timePeriod": {"from": f"{days[0]}T00:00:00.000Z", "to": f"{days[1]}T23:59:59.000Z"},
        "dataset": {
            "granularity": "Daily",
            "aggregation": {"totalCost": {"name": "Cost", "function": "Sum"}},
            "grouping": [{"type": "TagKey", "name": "workspace"}],
        },
    }
    body["dataset"].update(dataset)
    return body


def post(arm, body, scope=f"/subscriptions/{SUB}/resourceGroups/{RG}", suffix=""):
    return arm.call("POST", scope + QUERY + suffix, body, api=API)


def put_vm(arm, name: str, tag: str, **properties):
    """A VM with a 128 GiB Premium OS disk (a P10, as the portal's), tagged workspace=tag."""
    assert arm.put_nic(f"{name}-nic").status == 201
    body = arm.vm_body(f"{name}-nic", disk=f"{name}-osdisk")
    body["properties"]["storageProfile"]["osDisk"]["diskSizeGB"] = 128
    body["properties"].update(properties)
    body["tags"] = {"workspace": tag, "team": "vision"}
    reply = arm.call("PUT", arm.vm_path(name), body)
    assert reply.status == 201, reply
    return reply


def at(traveller, moment: datetime, arm) -> None:
    """Move the emulator's clock to `moment`; one request lets due operations complete."""
    traveller.move_to(moment)
    arm.call("GET", nic_id("none"))


@pytest.fixture
def lifetimes(sim, ctl, arm):
    """Two A100 VMs run under time travel, every operation instant (latency 0):
    w1 runs 2 Nov 20:00 - 3 Nov 02:00 and 10:00 - 12:00, is deleted at 12:00; its OS disk
    (kept by deleteOption Detach) is deleted at 18:00. w2 is Spot, runs 3 Nov 05:00 - 06:00,
    keeps its disk. Clock left at 4 Nov 00:00."""
    ctl.set_prices(BOOK)
    ctl.set_latency(0)
    with time_machine.travel(T0, tick=False) as traveller:
        put_vm(arm, "vm1", "w1")
        at(traveller, T0 + timedelta(hours=6), arm)
        assert arm.call("POST", arm.vm_path("vm1") + "/deallocate").status == 202
        at(traveller, T0 + timedelta(hours=9), arm)
        put_vm(arm, "vm2", "w2", priority="Spot")
        at(traveller, T0 + timedelta(hours=10), arm)
        assert arm.call("POST", arm.vm_path("vm2") + "/deallocate").status == 202
        at(traveller, T0 + timedelta(hours=14), arm)
        assert arm.call("POST", arm.vm_path("vm1") + "/start").status == 202
        at(traveller, T0 + timedelta(hours=16), arm)
        assert arm.call("DELETE", arm.vm_path("vm1")).status == 202
        at(traveller, T0 + timedelta(hours=22), arm)
        assert arm.call("DELETE", arm.disk_path("vm1-osdisk")).status == 202
        at(traveller, datetime(2025, 11, 4, tzinfo=UTC), arm)
        yield traveller


def test_daily_costs_are_worked_out_from_what_ran_when(lifetimes, arm):
    reply = post(arm, query())

    assert reply.status == 200
    # 2 Nov: w1 20:00-24:00, 4 h x $3.00. Its OS disk, untagged (Azure does not copy a VM's
    # tags to the disk it creates), 4 h x $19.71/730 = $0.027/h.
    # 3 Nov: w1 00:00-02:00 and 10:00-12:00, 4 h x $3.00; w2 1 h at the Spot $0.90.
    # Untagged: w1's disk 00:00-18:00 (18 h) + w2's disk 05:00-24:00 (19 h) = 37 h x $0.027.
    assert reply.body["properties"]["rows"] == [
        [0.108, 20251102, "workspace", None, "USD"],
        [12.0, 20251102, "workspace", "w1", "USD"],
        [0.999, 20251103, "workspace", None, "USD"],
        [12.0, 20251103, "workspace", "w1", "USD"],
        [0.9, 20251103, "workspace", "w2", "USD"],
    ]


def test_the_answer_has_the_query_result_shape(lifetimes, arm):
    body = post(arm, query()).body

    assert list(body) == ["id", "name", "type", "location", "sku", "eTag", "properties"]
    assert body["id"] == f"subscriptions/{SUB}/resourceGroups/{RG}{QUERY}/{body['name']}"
    assert body["type"] == "Microsoft.CostManagement/query"
    assert body["properties"]["nextLink"] is None
    assert body["properties"]["columns"] == [
        {"name": "Cost", "type": "Number"},
        {"name": "UsageDate", "type": "Number"},
        {"name": "TagKey", "type": "String"},
        {"name": "TagValue", "type": "String"},
        {"name": "Currency", "type": "String"},
    ]


def test_the_period_clips_days_and_now_clips_open_usage(lifetimes, arm):
    only_third = post(arm, query(days=("2025-11-03", "2025-11-03"))).body["properties"]["rows"]
    lifetimes.move_to(datetime(2025, 11, 4, 6, tzinfo=UTC))  # w2's disk is still billed
    today = post(arm, query(days=("2025-11-04", "2025-11-30"))).body["properties"]["rows"]

    assert [row[1] for row in only_third] == [20251103] * 3
    assert today == [[0.162, 20251104, "workspace", None, "USD"]]  # 6 h x $0.027, nothing after now


def test_other_resource_groups_count_only_at_subscription_scope(lifetimes, arm):
    elsewhere = post(arm, query(), scope=f"/subscriptions/{SUB}/resourceGroups/rg-other")
    everywhere = post(arm, query(), scope=f"/subscriptions/{SUB}")

    assert elsewhere.body["properties"]["rows"] == []
    assert len(everywhere.body["properties"]["rows"]) == 5


def test_a_price_change_splits_the_day(sim, ctl, arm):
    change = _price("NC24ads A100 v4", 4.00, effectiveStartDate="2025-11-02T22:00:00Z")
    ctl.set_prices([*BOOK, change])
    ctl.set_latency(0)
    with time_machine.travel(T0, tick=False) as traveller:
        put_vm(arm, "vm1", "w1")
        traveller.move_to(datetime(2025, 11, 3, tzinfo=UTC))

        rows = post(arm, query(days=("2025-11-02", "2025-11-02"))).body["properties"]["rows"]

    assert rows[1] == [14.0, 20251102, "workspace", "w1", "USD"]  # 2 h x $3 + 2 h x $4


def test_knobs_skew_what_azure_reports(lifetimes, arm, ctl):
    ctl.skew_costs(tag="w1", multiplier="1.1")
    ctl.skew_costs(tag="", extra_per_day=2)

    rows = post(arm, query()).body["properties"]["rows"]

    assert [row[0] for row in rows] == [2.108, 13.2, 2.999, 13.2, 0.9]
    assert ctl.costs()["skew"]["w1"] == {"multiplier": "1.1", "extra_per_day": "0"}


def test_without_grouping_each_day_is_one_row(lifetimes, arm):
    rows = post(arm, query(grouping=[])).body["properties"]["rows"]

    assert rows == [[12.108, 20251102, "USD"], [13.899, 20251103, "USD"]]


def test_pages_follow_with_a_skiptoken(lifetimes, arm, ctl):
    ctl.skew_costs(page_size=2)

    first = post(arm, query()).body["properties"]
    link = first["nextLink"]
    second = arm.call("POST", link, query(), api=None).body["properties"]
    third = arm.call("POST", second["nextLink"], query(), api=None).body["properties"]

    assert link.startswith(f"{arm.url}/subscriptions/{SUB}/resourceGroups/{RG}{QUERY}?")
    assert "api-version=2022-10-01" in link and "$skiptoken=" in link
    assert [len(p["rows"]) for p in (first, second, third)] == [2, 2, 1]
    assert third["nextLink"] is None
    assert post(arm, query(), suffix="?$skiptoken=%21%21").status == 400


def test_throttling_answers_429_with_cost_management_rate_limit_headers(sim, ctl, arm):
    ctl.inject("cost.query", "throttle", retry_after=2)

    throttled, served = post(arm, query()), post(arm, query())

    assert (throttled.status, served.status) == (429, 200)
    assert throttled.body["error"]["code"] == "429"
    for bucket in ("qpu", "entity", "tenant"):
        header = f"x-ms-ratelimit-microsoft.costmanagement-{bucket}-retry-after"
        assert throttled.headers[header] == "2"
    assert "retry-after" not in throttled.headers  # clients must read Cost Management's own


def test_other_faults(sim, ctl, arm):
    for kind in ("unavailable", "server_error", "authorization_failed"):
        ctl.inject("cost.query", kind)

    statuses = [post(arm, query()).status for _ in range(4)]

    assert statuses == [503, 500, 403, 200]


@pytest.mark.parametrize(
    "change",
    [
        {"timeframe": "MonthToDate"},
        {"type": "Forecast"},
        {"timePeriod": {"from": "yesterday", "to": "2025-11-03T00:00:00Z"}},
        {"timePeriod": {"from": "2025-11-03T00:00:00Z", "to": "2025-11-02T00:00:00Z"}},
    ],
)
def test_queries_outside_what_it_answers_are_400(sim, arm, change):
    reply = post(arm, {**query(), **change})

    assert reply.status == 400 and reply.body["error"]["code"] == "BadRequest"


@pytest.mark.parametrize(
    "dataset",
    [
        {"granularity": "Monthly"},
        {"aggregation": {"q": {"name": "UsageQuantity", "function": "Sum"}}},
        {"grouping": [{"type": "Dimension", "name": "ResourceGroup"}]},
        {"grouping": [{"type": "TagKey", "name": "a"}, {"type": "TagKey", "name": "b"}]},
    ],
)
def test_datasets_outside_what_it_answers_are_400(sim, arm, dataset):
    assert post(arm, query(**dataset)).status == 400


@pytest.mark.parametrize(
    ("knobs", "fault"),
    [({"multiplier": "many"}, None), ({"page_size": 0}, None), ({}, "conflict")],
)
def test_bad_cost_knobs_and_faults_are_refused(ctl, knobs, fault):
    with pytest.raises(SimControlError) as caught:
        if fault:
            ctl.inject("cost.query", fault)
        else:
            ctl.skew_costs(**knobs)
    assert caught.value.status == 400


def test_reset_forgets_the_ledger_and_the_knobs(lifetimes, ctl):
    ctl.skew_costs(tag="w1", multiplier=2)

    ctl.reset()

    assert ctl.costs() == {"usages": [], "skew": {}, "page_size": 1000}


FILES = {"serviceName": "Storage", "productName": "Premium Files", "armSkuName": ""}
GROUP = f"/subscriptions/{SUB}/resourceGroups/{RG}/providers/Microsoft.Compute/"
GROUP += "capacityReservationGroups/booking-b1"
ACCOUNT = f"/subscriptions/{SUB}/resourceGroups/{RG}/providers/Microsoft.Storage/"
ACCOUNT += "storageAccounts/teamvision01"


def test_a_share_bills_its_provisioned_gib_and_a_reservation_its_instances_once(sim, ctl, arm):
    """A reservation of 2 held 4 h, vm9 inside it for 2 h: Azure bills vm9 as a VM and the
    reservation's unused instances (capacity-reservation-overview, "Pricing and billing")."""
    files = _price(
        "Premium LRS",
        0.16,
        meterName="Premium LRS Provisioned",
        unitOfMeasure="1 GB/Month",
        **FILES,
    )
    ctl.set_prices([*BOOK, files])
    ctl.set_latency(0)
    tags = {"team": "vision"}
    with time_machine.travel(T0, tick=False) as traveller:
        account = {"location": "eastus", "kind": "FileStorage", "sku": {"name": "Premium_LRS"}}
        arm.call("PUT", ACCOUNT, {**account, "tags": tags}, api="2024-01-01")
        share = {"properties": {"enabledProtocols": "NFS", "shareQuota": 1024}}
        arm.call("PUT", f"{ACCOUNT}/fileServices/default/shares/data", share, api="2024-01-01")
        arm.call("PUT", GROUP, {"location": "eastus", "tags": {**tags, "booking": "b1"}})
        body = {"location": "eastus", "sku": {"name": A100, "capacity": 2}, "tags": tags}
        arm.call("PUT", f"{GROUP}/capacityReservations/instances", body)
        at(traveller, T0 + timedelta(hours=1), arm)
        put_vm(arm, "vm9", "w9", capacityReservation={"capacityReservationGroup": {"id": GROUP}})
        at(traveller, T0 + timedelta(hours=3), arm)
        assert arm.call("POST", arm.vm_path("vm9") + "/deallocate").status == 202
        at(traveller, T0 + timedelta(hours=4), arm)
        arm.call("DELETE", f"{GROUP}/capacityReservations/instances")
        at(traveller, datetime(2025, 11, 3, tzinfo=UTC), arm)

        by_team = post(arm, query(days=("2025-11-02", "2025-11-02"), grouping=[
            {"type": "TagKey", "name": "team"}
        ])).body["properties"]["rows"]  # fmt: skip
        by_workspace = post(arm, query(days=("2025-11-02", "2025-11-02")))

    # Team "vision": 2 A100 x 4 h x $3.00 = $24 in all, used or not and never twice: vm9's 2 h
    # ($6, under its workspace tag) + the unused instances (2 x 1 h + 1 x 2 h + 2 x 1 h = $18).
    # The share: 1024 GiB x 4 h x $0.16/730 = $0.89775342. vm9's OS disk (untagged), 3 h x
    # $19.71/730 = $0.081.
    assert by_team == [
        [0.081, 20251102, "team", None, "USD"],
        [24.89775342, 20251102, "team", "vision", "USD"],
    ]
    by_tag = {r[3]: r[0] for r in by_workspace.body["properties"]["rows"]}
    assert by_tag == {None: 18.97875342, "w9": 6.0}
