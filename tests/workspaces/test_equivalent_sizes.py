"""Equivalent sizes when Azure has no capacity (issue 18, item 6): a VM request may accept
other sizes with as much GPU memory or more, up to a price ceiling; when Azure has no capacity
(the emulator's capacity model), no quota, or withholds the size, the worker takes the next in
price order, re-checking the team's quota and budget, and says each step in the history. With
every option exhausted the workspace waits, requested, saying what it tried."""

import uuid
from decimal import Decimal
from fractions import Fraction

import pytest
from django.urls import reverse
from django.utils import timezone

from billing.models import UsageInterval
from common.months import month_bounds
from teams.models import GpuQuota, Team
from tests.factories import SSH_KEY, OfferingFactory
from workspaces import equivalents, selectors
from workspaces.backends.vm_request import workspace_request
from workspaces.models import Workspace
from workspaces.requests import WorkspaceActionError
from workspaces.states import Status
from workspaces.tasks import advance_workspace

pytestmark = pytest.mark.django_db(transaction=True)

A100 = "Standard_NC24ads_A100_v4"  # 1 x A100 80 GB, $3.673/hour in eastus
H100 = "Standard_NC40ads_H100_v5"  # 1 x H100 94 GB, $6.98
A100X2 = "Standard_NC48ads_A100_v4"  # 2 x A100 80 GB, $7.346
A100_FAMILY = "standardNCADSA100v4Family"


@pytest.fixture(autouse=True)
def _recheck_at_once(settings):
    settings.AZURE_PRECHECK_RETRY_SECONDS = 0


@pytest.fixture
def sizes(cast):
    """The chosen A100 and its two equivalents in eastus; the team may hold H100s too."""
    GpuQuota.objects.create(team=cast.team, gpu_model="H100", gpus=2)
    chosen = OfferingFactory()
    OfferingFactory(
        vm_size=H100, gpu_model="H100", gpu_memory_gib=94, vcpus=40, price_per_hour=Decimal("6.98")
    )
    OfferingFactory(vm_size=A100X2, gpu_count=2, vcpus=48, price_per_hour=Decimal("7.346"))
    # Not equivalent: less GPU memory per GPU, whatever the price.
    OfferingFactory(
        vm_size="Standard_NC4as_T4_v3", gpu_model="T4", gpu_memory_gib=16, vcpus=4,
        price_per_hour=Decimal("0.526"),
    )  # fmt: skip
    return chosen


def _request(cast, offering, *, max_price=Decimal("7.50"), accept=True):
    return workspace_request(
        user=cast.researcher,
        team=cast.team,
        name=f"llm-{uuid.uuid4().hex[:6]}",
        offering=offering,
        ssh_public_key=SSH_KEY,
        request_key=uuid.uuid4(),
        now=timezone.now(),
        accept_equivalents=accept,
        max_price=max_price,
    )


def _reload(ws):
    return Workspace.objects.get(pk=ws.pk)


def _history(ws):
    return [(e.to_status, e.reason) for e in ws.events.order_by("at", "id")]


def _vm_puts(sim):
    return [r for r in sim.requests() if r["method"] == "PUT" and "virtualMachines" in r["path"]]


def test_the_rule_takes_as_much_gpu_memory_or_more_within_the_ceiling(sizes):
    found = equivalents.offering_equivalents(
        offering=sizes, max_price=Decimal("7.50"), now=timezone.now()
    )
    assert [(e.vm_size, e.price_per_hour) for e in found] == [
        (H100, Decimal("6.98")),
        (A100X2, Decimal("7.346")),
    ]
    default = equivalents.default_max_price(sizes.price_per_hour)
    assert default == Decimal("5.51")  # $3.673 x 1.5, to the cent: neither is that cheap
    assert (
        equivalents.offering_equivalents(offering=sizes, max_price=default, now=timezone.now())
        == []
    )


def test_the_request_stores_the_accepted_sizes_and_the_ceiling(cast, sim, sizes):
    ws = _reload(_request(cast, sizes))
    assert ws.accepted_sizes == [A100, H100, A100X2]
    assert ws.accepted_max_price == Decimal("7.50") and ws.requested_region == "eastus"
    first = ws.events.order_by("at", "id").first()
    assert first.reason.endswith(
        f"accepting equivalent sizes up to $7.5000/hour ({H100}, {A100X2})"
    )
    assert ws.status == Status.RUNNING and ws.vm_size == A100  # Azure had room: no change


def test_first_size_without_capacity_the_second_is_taken_and_billed(cast, sim, sizes):
    sim.set_capacity("eastus", A100, 0)

    ws = _reload(_request(cast, sizes))

    assert ws.status == Status.RUNNING, ws.waiting_reason or ws.error_message
    assert (ws.vm_size, ws.gpu_model, ws.gpu_count) == (H100, "H100", 1)
    assert ws.price_per_hour == Decimal("6.98") and ws.placement_tried == []
    steps = _history(ws)
    assert [s for s, _ in steps] == [
        Status.REQUESTED,
        Status.PROVISIONING,
        Status.REQUESTED,
        Status.PROVISIONING,
        Status.RUNNING,
    ]
    assert steps[2][1] == (
        f"{A100} has no capacity in eastus (AllocationFailed); trying the next accepted size."
    )
    assert steps[3][1].startswith(
        f"{A100} has no capacity in eastus (AllocationFailed); "
        f"trying {H100} at $6.9800/hour in eastus. Creating the NIC and VM"
    )
    [vm] = sim.state()["virtualMachines"]  # the failed A100 left nothing behind
    assert vm["vmSize"] == H100 and len(sim.state()["networkInterfaces"]) == 1
    compute = UsageInterval.objects.filter(workspace_id=ws.pk, meter="compute", ended_at=None)
    assert [(u.sku, u.price_per_hour) for u in compute] == [(H100, Decimal("6.98"))]


def test_without_azure_quota_for_the_first_the_next_is_taken_without_a_put(cast, sim, sizes):
    sim.set_quota("eastus", A100_FAMILY, 0)

    ws = _reload(_request(cast, sizes))

    assert (ws.status, ws.vm_size) == (Status.RUNNING, H100)
    assert len(_vm_puts(sim)) == 1
    moved = ws.events.get(to_status=Status.PROVISIONING)
    assert moved.reason.startswith(
        f"Azure quota for {A100_FAMILY} in eastus is 0/0 vCPUs; this size needs 24 more; "
        f"trying {H100} at $6.9800/hour in eastus."
    )
    assert moved.detail["from_size"] == A100 and moved.detail["to_size"] == H100


def test_a_size_over_the_teams_gpu_quota_is_skipped_with_the_reason(cast, sim, sizes):
    GpuQuota.objects.filter(team=cast.team, gpu_model="H100").delete()
    sim.set_capacity("eastus", A100, 0)

    ws = _reload(_request(cast, sizes))

    assert (ws.status, ws.vm_size, ws.gpu_count) == (Status.RUNNING, A100X2, 2)
    moved = ws.events.filter(to_status=Status.PROVISIONING).last()
    assert f"{H100} at $6.9800/hour in eastus is skipped: " in moved.reason
    assert "H100" in moved.reason.split("skipped: ")[1]  # the team's H100 quota says why
    assert f"trying {A100X2} at $7.3460/hour in eastus." in moved.reason


def test_dearer_sizes_over_the_budget_are_skipped_and_it_waits(cast, sim, sizes):
    now = timezone.now()
    hours_left = Decimal((month_bounds(now)[1] - now).total_seconds() / 3600)
    # The A100 ($3.673/hour) lasts the month on this budget; $6.98 or more does not.
    Team.objects.filter(pk=cast.team.pk).update(monthly_budget=(hours_left * 4).quantize(1))
    sim.set_capacity("eastus", A100, 0)

    ws = _reload(_request(cast, sizes))

    assert ws.status == Status.REQUESTED and ws.vm_size == A100
    assert ws.waiting_reason.startswith(
        f"No accepted size has room now. Tried: {A100} has no capacity in eastus "
        f"(AllocationFailed). {H100} at $6.9800/hour in eastus is skipped: At $167.52 per day"
    )
    assert f"{A100X2} at $7.3460/hour in eastus is skipped: At $176.30 per day" in (
        ws.waiting_reason
    )
    assert ws.error_code == "" and sim.state()["virtualMachines"] == []


def test_every_option_exhausted_waits_then_proceeds_when_capacity_returns(cast, sim, sizes):
    for size in (A100, H100, A100X2):
        sim.set_capacity("eastus", size, 0)

    ws = _reload(_request(cast, sizes))

    assert ws.status == Status.REQUESTED
    assert ws.waiting_reason == (
        f"No accepted size has room now. Tried: {A100} has no capacity in eastus "
        f"(AllocationFailed). {H100} has no capacity in eastus (AllocationFailed). "
        f"{A100X2} has no capacity in eastus (AllocationFailed). Waiting for capacity: every "
        "option is tried again every 1 minute."
    )
    state = sim.state()
    assert state["virtualMachines"] == state["networkInterfaces"] == state["disks"] == []
    page_reason = ws.waiting_reason
    # Issue 29, item 9: the last refusal promises no next size, there is none.
    refusals = [r for s, r in _history(ws) if s == Status.REQUESTED][1:]
    assert [r.endswith("trying the next accepted size.") for r in refusals] == [True, True, False]
    assert refusals[-1].endswith(
        "no other accepted size or region is left to try; waiting for capacity."
    )

    sim.set_capacity("eastus", A100X2, 1)
    advance_workspace.apply(args=[str(ws.pk)])

    ws = _reload(ws)
    assert (ws.status, ws.vm_size, ws.waiting_reason) == (Status.RUNNING, A100X2, "")
    assert page_reason  # what it said while it waited
    assert [v["vmSize"] for v in sim.state()["virtualMachines"]] == [A100X2]


def test_sku_not_available_at_the_put_moves_on_too(cast, sim, sizes):
    sim.inject("vm.create", "sku_not_available")
    ws = _reload(_request(cast, sizes))
    assert (ws.status, ws.vm_size) == (Status.RUNNING, H100)
    refused = ws.events.filter(to_status=Status.REQUESTED).last()
    assert refused.reason.startswith(f"{A100} is not available in eastus (SkuNotAvailable)")
    assert refused.detail["code"] == "SkuNotAvailable"


def test_then_another_region_where_fallback_is_allowed(cast, sim, sizes):
    type(sizes).objects.filter(pk=sizes.pk).update(allow_region_fallback=True)
    OfferingFactory(region="westus3")
    for size in (A100, H100, A100X2):
        sim.set_capacity("eastus", size, 0)

    ws = _reload(_request(cast, sizes))

    assert (ws.status, ws.vm_size, ws.region) == (Status.RUNNING, A100, "westus3")
    moved = ws.events.filter(to_status=Status.PROVISIONING).last()
    assert moved.reason.startswith("Moved from eastus to westus3: ")
    assert f"{A100X2} has no capacity in eastus (AllocationFailed)." in moved.reason


def test_without_equivalents_accepted_a_capacity_refusal_still_fails(cast, sim, sizes):
    sim.set_capacity("eastus", A100, 0)
    ws = _reload(_request(cast, sizes, accept=False, max_price=None))
    assert (ws.status, ws.error_code) == (Status.FAILED, "AllocationFailed")
    assert ws.accepted_sizes == []


def test_ticked_with_no_equivalent_the_history_promises_no_next_size(cast, sim, sizes):
    # Issue 29, item 9: the default ceiling ($5.51) leaves no equivalent of the A100.
    sim.set_capacity("eastus", A100, 0)
    ws = _reload(_request(cast, sizes, max_price=None))
    assert (ws.status, ws.error_code, ws.accepted_sizes) == (Status.FAILED, "AllocationFailed", [])
    reasons = [r for _s, r in _history(ws)]
    assert reasons[0].endswith("; no size is equivalent up to $5.5100/hour, so only this one")
    assert not [r for r in reasons if "next accepted size" in r], reasons


def test_a_ceiling_below_the_chosen_price_is_refused(cast, sim, sizes):
    with pytest.raises(WorkspaceActionError, match="below Standard_NC24ads_A100_v4"):
        _request(cast, sizes, max_price=Decimal("1.00"))


# --- the request form ---------------------------------------------------------------------


def test_the_form_panel_lists_the_equivalents_in_price_order(client, cast, sizes):
    client.force_login(cast.researcher)
    url = reverse("workspaces:request-equivalents")
    panel = client.get(url, {"offering": sizes.pk}).content.decode()
    assert 'up to <strong data-testid="ceiling">$5.5100/hour</strong> (the default' in panel
    assert "No offered size in eastus is equivalent under this ceiling." in panel

    panel = client.get(url, {"offering": sizes.pk, "max_price": "7.5"}).content.decode()
    assert panel.index(H100) < panel.index(A100X2)
    assert "Standard_NC4as_T4_v3" not in panel


@pytest.mark.parametrize(
    "params",
    [
        {"offering": "x"},
        {"offering": "999999"},
        {"offering": "1", "max_price": "NaN"},
        {"offering": "1", "max_price": "-1"},
        {"offering": "1", "max_price": "1e400"},
        {"offering": "1", "max_price": "5\x00"},
    ],
)
def test_the_panel_answers_bad_input_with_a_message(client, cast, sizes, params):
    client.force_login(cast.researcher)
    params = {k: (str(sizes.pk) if v == "1" else v) for k, v in params.items()}
    reply = client.get(reverse("workspaces:request-equivalents"), params)
    assert reply.status_code == 200 and 'role="alert"' in reply.content.decode()


def _form(cast, offering, **extra):
    return {
        "team": cast.team.pk,
        "name": "llm-eq",
        "region": "eastus",
        "offering": offering.pk,
        "ssh_public_key": SSH_KEY,
        "request_key": str(uuid.uuid4()),
        **extra,
    }


def test_the_form_stores_what_the_user_accepted(client, cast, sim, sizes):
    client.force_login(cast.researcher)
    form = _form(cast, sizes, accept_equivalents="on", max_price="7.00")
    reply = client.post(reverse("workspaces:request"), form)
    assert reply.status_code == 302
    ws = Workspace.objects.get(name="llm-eq")
    assert ws.accepted_sizes == [A100, H100] and ws.accepted_max_price == Decimal("7.00")


@pytest.mark.parametrize("ceiling", ["abc", "0", "1000000", "1.00"])
def test_the_form_refuses_a_bad_ceiling_with_a_field_error(client, cast, sim, sizes, ceiling):
    client.force_login(cast.researcher)
    form = _form(cast, sizes, accept_equivalents="on", max_price=ceiling)
    reply = client.post(reverse("workspaces:request"), form)
    assert reply.status_code == 200
    assert not Workspace.objects.exists()
    assert 'invalid-feedback d-block" role="alert"' in reply.content.decode()


def test_the_tick_box_is_disabled_while_no_size_is_equivalent(client, cast, sizes):
    # Issue 29, item 9: the panel said none exists, yet the box could be ticked.
    client.force_login(cast.researcher)
    url = reverse("workspaces:request-equivalents")
    panel = client.get(url, {"offering": sizes.pk, "accept_equivalents": "on"}).content.decode()
    tick = panel[panel.index('id="equivalents-tick"') :]
    assert tick.startswith('id="equivalents-tick" hx-swap-oob="true"')
    assert 'disabled data-testid="equivalents-none"' in tick
    assert "nothing to take instead" in tick

    panel = client.get(
        url, {"offering": sizes.pk, "max_price": "7.5", "accept_equivalents": "on"}
    ).content.decode()
    tick = panel[panel.index('id="equivalents-tick"') :]
    assert "disabled" not in tick.split("</p>")[0] and "checked" in tick.split("</p>")[0]

    page = client.post(reverse("workspaces:request"), _form(cast, sizes, name="")).content
    tick = page.decode().split('id="equivalents-tick"')[1].split("</p>")[0]
    assert 'disabled data-testid="equivalents-none"' in tick  # the page after a refused form


def test_the_form_shows_the_checkbox_and_the_ceiling(client, cast, sizes):
    client.force_login(cast.researcher)
    page = client.get(reverse("workspaces:request")).content.decode()
    assert "Accept equivalent sizes" in page and 'name="max_price"' in page
    assert reverse("workspaces:request-equivalents") in page


def test_a_fractional_a10_takes_the_next_partition_and_its_quota_share(cast, sim):
    GpuQuota.objects.create(team=cast.team, gpu_model="A10", gpus=1)
    nv6 = OfferingFactory(
        vm_size="Standard_NV6ads_A10_v5", gpu_model="A10", gpu_count=1, gpu_partition=6,
        gpu_memory_gib=4, vcpus=6, memory_gib=Decimal("55"), price_per_hour=Decimal("0.454"),
    )  # fmt: skip
    OfferingFactory(
        vm_size="Standard_NV12ads_A10_v5", gpu_model="A10", gpu_count=1, gpu_partition=3,
        gpu_memory_gib=8, vcpus=12, memory_gib=Decimal("110"), price_per_hour=Decimal("0.908"),
    )  # fmt: skip
    sim.set_capacity("eastus", "Standard_NV6ads_A10_v5", 0)

    ws = _reload(_request(cast, nv6, max_price=Decimal("1.00")))

    assert (ws.status, ws.vm_size) == (Status.RUNNING, "Standard_NV12ads_A10_v5")
    assert (ws.gpu_count, ws.gpu_partition, ws.price_per_hour) == (1, 3, Decimal("0.908"))
    usage = selectors.team_gpus_in_use(team_ids=[cast.team.pk])[cast.team.pk]
    assert usage["A10"] == Fraction(1, 3)  # a third of an A10 held, not a sixth
