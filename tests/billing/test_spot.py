"""Spot workspaces end to end: requested at the Spot price, created as Azure Spot VMs through the
real SDK and the emulator, evictions noticed by the beat task (stopped, history, notice, meter
closed) exactly once, and started again. Azure (the emulator) and time are all that is faked."""

import time
import uuid
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.core import mail
from django.urls import reverse
from django.utils import timezone

from billing.models import Price, UsageInterval
from cloud import azure_vm
from notifications.models import Notice
from notifications.notice_text import in_zone
from teams.models import Team
from tests.factories import SSH_KEY, OfferingFactory, WorkspaceFactory
from workspaces import tasks
from workspaces.actions import workspace_start
from workspaces.azure import azure_settings
from workspaces.backends.vm_request import workspace_request
from workspaces.evictions import EVICTION_REASON, workspace_evictions_detect
from workspaces.models import Workspace
from workspaces.requests import WorkspaceActionError
from workspaces.states import Status

A100 = "Standard_NC24ads_A100_v4"
SPOT_PRICE = Decimal("0.7346")
LONG_AGO = datetime(2026, 1, 1, tzinfo=UTC)


def spot_price(unit_price=SPOT_PRICE, *, sku=A100, region="eastus", start=LONG_AGO):
    return Price.objects.create(
        kind="vm",
        sku=sku,
        region=region,
        spot=True,
        unit_price=unit_price,
        unit="1 Hour",
        effective_start=start,
        source="api",
        synced_at=start,
    )


def request(cast, *, spot=True, offering=None, now=None, name="spot-train"):
    return workspace_request(
        user=cast.researcher,
        team=cast.team,
        name=name,
        offering=offering or OfferingFactory(),
        ssh_public_key=SSH_KEY,
        request_key=uuid.uuid4(),
        now=now or timezone.now(),
        spot=spot,
        justification="Needed for the deadline",
    )


def reload(ws):
    return Workspace.objects.get(pk=ws.pk)


def vm_of(sim, ws):
    return next(v for v in sim.state()["virtualMachines"] if v["name"] == f"ws-{ws.short_id}")


@pytest.mark.django_db(transaction=True)
class TestSpotLife:
    """Through services and eager tasks against the emulator."""

    def test_a_spot_request_is_quoted_and_created_as_a_spot_vm(self, cast, sim):
        spot_price()

        ws = reload(request(cast))

        assert ws.status == Status.RUNNING and ws.spot
        assert ws.price_per_hour == SPOT_PRICE
        vm = vm_of(sim, ws)
        assert (vm["priority"], vm["evictionPolicy"], vm["billingProfile"]) == (
            "Spot",
            "Deallocate",
            {"maxPrice": -1},
        )
        assert "as a Spot VM" in ws.events.first().reason
        compute = UsageInterval.objects.get(workspace=ws, meter="compute")
        assert compute.spot and compute.price_per_hour == SPOT_PRICE
        assert not UsageInterval.objects.get(workspace=ws, meter="disk").spot

    def test_region_fallback_takes_the_cheapest_region_with_a_spot_price_at_that_price(
        self, cast, sim
    ):
        here = OfferingFactory(allow_region_fallback=True)
        OfferingFactory(region="westus3", price_per_hour=Decimal("3.6730"))  # no Spot price
        OfferingFactory(region="westus", price_per_hour=Decimal("4.7750"))
        spot_price()
        spot_price(Decimal("0.9550"), region="westus")
        sim.set_quota("eastus", "lowPriorityCores", 0)  # Spot VMs' own quota, not the family's

        ws = reload(request(cast, offering=here))

        assert (ws.status, ws.region, ws.price_per_hour) == (
            Status.RUNNING,
            "westus",
            Decimal("0.9550"),
        )
        assert vm_of(sim, ws)["priority"] == "Spot"

    def test_an_eviction_stops_the_workspace_once_tells_the_owner_and_closes_the_meter(
        self, cast, sim, django_capture_on_commit_callbacks
    ):
        spot_price()
        ws = request(cast)
        sim.evict(f"ws-{ws.short_id}")
        now = timezone.now()

        with django_capture_on_commit_callbacks(execute=True):  # the email leaves on commit
            first = workspace_evictions_detect(now=now)
        second = workspace_evictions_detect(now=now + timedelta(minutes=1))

        assert first.evicted == [ws.pk] and second.evicted == [] and second.checked == 0
        ws = reload(ws)
        assert ws.status == Status.STOPPED and ws.evicted_at == now
        event = ws.events.last()
        assert (event.from_status, event.to_status, event.actor) == (
            Status.RUNNING,
            Status.STOPPED,
            None,
        )
        assert event.reason == EVICTION_REASON == "Evicted by Azure (Spot capacity)"
        [notice] = Notice.objects.filter(user=cast.researcher)
        assert "deallocated" in notice.text and notice.link == f"/workspaces/{ws.pk}/"
        told = in_zone(notice.text, UTC)  # the team's zone
        assert told.startswith(f"spot-train was stopped automatically at {now:%H:%M} UTC.")
        assert mail.outbox[0].body.startswith(told)
        assert [m.subject for m in mail.outbox] == ["spot-train was evicted by Azure"]
        compute = UsageInterval.objects.get(workspace=ws, meter="compute")
        assert compute.ended_at == now
        assert UsageInterval.objects.get(workspace=ws, meter="disk").ended_at is None

    def test_an_evicted_workspace_starts_again(self, cast, sim):
        spot_price()
        ws = request(cast)
        sim.evict(f"ws-{ws.short_id}")
        workspace_evictions_detect(now=timezone.now())

        workspace_start(user=cast.researcher, workspace=reload(ws), now=timezone.now())

        ws = reload(ws)
        assert ws.status == Status.RUNNING and ws.evicted_at is None
        assert vm_of(sim, ws)["powerState"] == "running"
        assert UsageInterval.objects.filter(workspace=ws, meter="compute", spot=True).count() == 2

    def test_a_start_without_spot_capacity_shows_azures_error_and_waits_queued(self, cast, sim):
        spot_price()
        ws = request(cast)
        sim.evict(f"ws-{ws.short_id}")
        tasks.detect_spot_evictions.delay()
        sim.set_capacity("eastus", A100, 0)

        workspace_start(user=cast.researcher, workspace=reload(ws), now=timezone.now())

        ws = reload(ws)
        assert ws.status == Status.QUEUED and ws.error_code == "AllocationFailed"
        assert "sufficient capacity" in ws.error_message
        assert vm_of(sim, ws)["powerState"] == "deallocated"

    def test_running_vms_and_regular_workspaces_are_left_alone(self, cast, sim):
        spot_price()
        spot = request(cast)
        regular = request(cast, spot=False, name="regular-train")
        # Someone deallocates the regular VM outside the portal: that is no eviction.
        name = f"ws-{regular.short_id}"
        token = azure_vm.begin(azure_settings(), "deallocate", name=name)
        while not azure_vm.poll(azure_settings(), "deallocate", name=name, token=token).done:
            time.sleep(0.02)

        result = workspace_evictions_detect(now=timezone.now())

        assert result.checked == 1 and result.evicted == []
        assert reload(spot).status == reload(regular).status == Status.RUNNING

    def test_no_running_spot_workspace_means_no_azure_call(self, cast, sim):
        request(cast, spot=False)
        before = len(sim.requests())

        assert workspace_evictions_detect(now=timezone.now()).checked == 0
        assert len(sim.requests()) == before

    def test_azure_not_answering_changes_nothing_until_the_next_run(self, cast, sim):
        spot_price()
        ws = request(cast)
        sim.evict(f"ws-{ws.short_id}")
        sim.inject("vm.list", "server_error", count=3)  # beyond the SDK's 2 retries

        assert tasks.detect_spot_evictions.delay().get() == 0
        assert reload(ws).status == Status.RUNNING

        assert tasks.detect_spot_evictions.delay().get() == 1
        assert reload(ws).status == Status.STOPPED


@pytest.mark.django_db
class TestSpotRequest:
    """The request's quote and checks; nothing reaches Azure (the team is over budget, or the
    request is refused)."""

    def test_a_size_without_a_spot_price_cannot_be_requested_as_spot(self, cast):
        spot_price(region="westeurope")  # elsewhere only

        with pytest.raises(WorkspaceActionError, match="no Spot price for"):
            request(cast)
        assert not Workspace.objects.exists()

    def test_the_spot_price_in_effect_now_is_quoted(self, cast):
        Team.objects.filter(pk=cast.team.pk).update(monthly_budget=Decimal("1"))
        spot_price(Decimal("0.80"), start=LONG_AGO)
        spot_price(Decimal("0.70"), start=datetime(2026, 11, 10, tzinfo=UTC))
        spot_price(Decimal("0.60"), start=datetime(2026, 11, 20, tzinfo=UTC))

        ws = request(cast, now=datetime(2026, 11, 15, tzinfo=UTC))

        assert ws.price_per_hour == Decimal("0.7000") and ws.spot

    def test_the_budget_is_measured_at_the_spot_price(self, cast):
        # 1 Nov: 720 hours left. Pay-as-you-go $3.673/h x 720 = $2,644.56 > $1,000;
        # Spot $0.7346/h x 720 = $528.91 <= $1,000.
        Team.objects.filter(pk=cast.team.pk).update(monthly_budget=Decimal("1000"))
        spot_price()
        nov_1 = datetime(2026, 11, 1, tzinfo=UTC)

        regular = request(cast, spot=False, now=nov_1, name="regular-train")
        spot = request(cast, now=nov_1)

        assert regular.status == Status.PENDING_APPROVAL
        assert any("$88.15 per day" in r for r in regular.quota_request.over_quota)  # 24 x $3.673
        assert spot.status == Status.REQUESTED and spot.price_per_hour == SPOT_PRICE


@pytest.mark.django_db
class TestSpotPages:
    def _form(self, offering, **overrides):
        return {
            "team": "",
            "name": "spot-train",
            "region": offering.region,
            "offering": offering.pk,
            "ssh_public_key": SSH_KEY,
            "request_key": str(uuid.uuid4()),
            "spot": "on",
            **overrides,
        }

    def test_the_size_table_shows_the_spot_price_where_there_is_one(self, client, cast):
        OfferingFactory()
        OfferingFactory(vm_size="Standard_NC4as_T4_v3", gpu_model="T4", price_per_hour="0.526")
        spot_price()
        client.force_login(cast.researcher)

        page = client.get(reverse("workspaces:request"), {"region": "eastus"})

        cells = page.content.decode().split('data-testid="spot-price">')[1:]
        shown = sorted(cell.split("</td>")[0] for cell in cells)
        assert shown == ["$0.7346", '<span aria-label="no Spot price">—</span>']
        text = page.content.decode()
        assert "$3.67" in text  # the pay-as-you-go price beside it
        assert 'class="form-text d-block">Up to ~90% cheaper' in text
        assert "Azure can evict it" in text

    def test_spot_for_a_size_without_a_spot_price_is_a_form_error(self, client, cast):
        offering = OfferingFactory()
        client.force_login(cast.researcher)

        response = client.post(
            reverse("workspaces:request"), self._form(offering, team=cast.team.pk)
        )

        assert response.status_code == 200
        assert "Azure has no Spot price for Standard_NC24ads_A100_v4 in eastus" in (
            response.content.decode()
        )
        assert not Workspace.objects.exists()

    def test_the_form_requests_a_spot_workspace(self, client, cast):
        offering = OfferingFactory()
        spot_price()
        client.force_login(cast.researcher)

        response = client.post(
            reverse("workspaces:request"), self._form(offering, team=cast.team.pk)
        )

        ws = Workspace.objects.get()
        assert response.status_code == 302 and ws.spot and ws.price_per_hour == SPOT_PRICE

    def test_the_detail_page_says_spot_and_that_azure_evicted_it(self, client, cast):
        ws = WorkspaceFactory(
            team=cast.team,
            owner=cast.researcher,
            status=Status.STOPPED,
            spot=True,
            evicted_at=timezone.now(),
        )
        client.force_login(cast.teammate)

        page = client.get(reverse("workspaces:detail", args=[ws.pk])).content.decode()

        assert 'data-testid="spot"' in page and "Spot: Azure can evict it" in page
        assert "Evicted by Azure" in page and "OS disk is kept" in page
