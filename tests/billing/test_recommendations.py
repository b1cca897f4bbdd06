"""Right-sizing from measured use (issue 18, item 4): GPU memory kept per GPU, one advice per
workspace with 24 hours of telemetry, never a size that would not hold the peak plus 20 %,
savings in USD from the catalog's prices x 730 hours, the workspace page's panel, the
Savings pages, the weekly digest and the beat task."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
import time_machine
from django.core import mail
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from billing.models import Advice, Price, Recommendation
from billing.recommendations import recommendations_refresh
from billing.rightsizing import HEADROOM
from billing.usage import percentile_cont, usage_python, usage_sql
from clusters.models import AksCluster, ClusterTeam, NodePool, PoolStatus
from teams.models import IdlePolicy, Membership, Role
from tests.factories import OfferingFactory, TeamFactory, UserFactory, WorkspaceFactory
from workspaces.models import TelemetryHour, TelemetrySample
from workspaces.states import Status
from workspaces.telemetry import heartbeat_parse, telemetry_downsample

NOW = datetime(2026, 11, 24, 4, 40, tzinfo=UTC)
A100 = "Standard_NC24ads_A100_v4"
A100X2 = "Standard_NC48ads_A100_v4"
T4 = "Standard_NC4as_T4_v3"
A10 = "Standard_NV36ads_A10_v5"
H100 = "Standard_NC40ads_H100_v5"
GPU_MIB = 81920  # an A100 80GB as NVML reports it


@pytest.fixture
def catalog(db):
    """Sizes of eastus at Linux pay-as-you-go prices (as data/azure_gpu_vms.csv has them)."""
    OfferingFactory(vm_size=A100, price_per_hour=Decimal("3.6730"))
    OfferingFactory(vm_size=A100X2, gpu_count=2, vcpus=48, price_per_hour=Decimal("7.3460"))
    OfferingFactory(
        vm_size=T4, gpu_model="T4", gpu_memory_gib=16, vcpus=4, price_per_hour=Decimal("0.5260")
    )
    OfferingFactory(
        vm_size=A10, gpu_model="A10", gpu_memory_gib=24, vcpus=36, price_per_hour=Decimal("3.2000")
    )
    OfferingFactory(
        vm_size=H100,
        gpu_model="H100",
        gpu_memory_gib=94,
        vcpus=40,
        price_per_hour=Decimal("6.9800"),
    )
    # Not offered: never proposed, however cheap.
    OfferingFactory(
        vm_size="Standard_NC8as_T4_v3",
        gpu_model="T4",
        gpu_memory_gib=16,
        price_per_hour=Decimal("0.1000"),
        offered=False,
    )


def _workspace(cast, vm_size=A100, gpus=1, price="3.6730", **kw):
    return WorkspaceFactory(
        team=cast.team,
        owner=cast.researcher,
        status=Status.RUNNING,
        vm_size=vm_size,
        gpu_model="A100",
        gpu_count=gpus,
        price_per_hour=Decimal(price),
        **kw,
    )


def _hours(
    ws, n=24, *, mem, util=40, interactive=1, total=GPU_MIB, mem_sum=None, in_use=1, before=0
):
    """``n`` folded hours ending ``before`` hours before the folded ones end (49 hours before
    NOW); ``mem`` the fullest GPU (MiB) of each, or a list of one per hour."""
    mems = mem if isinstance(mem, list) else [mem] * n
    start = NOW.replace(minute=0) - timedelta(hours=len(mems) + 49 + before)
    TelemetryHour.objects.bulk_create(
        TelemetryHour(
            workspace=ws,
            hour=start + timedelta(hours=i),
            samples=120,
            gpu_util_avg=util,
            gpu_util_max=util,
            interactive_max=interactive,
            gpu_mem_max_mib=m,
            gpu_mem_sum_mib=m if mem_sum is None else mem_sum,
            gpu_mem_total_mib=total,
            gpus_in_use_max=in_use,
        )
        for i, m in enumerate(mems)
    )


def _advise(ws):
    recommendations_refresh(now=NOW)
    return Recommendation.objects.get(workspace=ws)


def _mig_pool(team, profile="MIG1g", price="3.6730"):
    cluster = AksCluster.objects.create(
        subscription_id="00000000-0000-0000-0000-000000000000",
        resource_group="rg",
        name=f"aks-{profile.lower()}",
        location="eastus",
        registered_at=NOW,
    )
    ClusterTeam.objects.create(cluster=cluster, team=team, namespace="vision")
    return NodePool.objects.create(
        cluster=cluster,
        name=profile.lower(),
        vm_size=A100,
        gpu_model="A100",
        gpus_per_node=1,
        gpu_memory_gib=80,
        gpu_instance_profile=profile,
        node_count=1,
        price_per_hour=Decimal(price),
        status=PoolStatus.READY,
        created_at=NOW,
        updated_at=NOW,
    )


# -- telemetry: the fullest GPU is kept, per sample and per hour --------------------------------


def test_a_sample_keeps_the_fullest_gpu_its_memory_and_the_gpus_in_use():
    body = (
        b'{"samples": [{"at": "2026-11-24T03:00:00Z", "nvml": "ok", "gpus": ['
        b'{"name": "A100", "util_percent": 90, "mem_used_mib": 30000, "mem_total_mib": 81920},'
        b'{"name": "A100", "util_percent": 10, "mem_used_mib": 10000, "mem_total_mib": 81920},'
        b'{"name": "A100", "util_percent": 0, "mem_used_mib": 300, "mem_total_mib": 81920}]}]}'
    )
    (sample,) = heartbeat_parse(body)
    assert sample.gpu_mem_max_mib == 30000  # not the 40,300 summed over the GPUs
    assert sample.gpu_mem_used_mib == 40300
    assert sample.gpu_mem_total_mib == 81920
    assert sample.gpus_in_use == 2  # 300 MiB is a CUDA context, not use


def test_the_hourly_fold_keeps_the_hours_fullest_gpu(cast):
    ws = _workspace(cast)
    at = NOW - timedelta(hours=60)
    for minutes, (top, total_used) in enumerate([(30000, 40000), (50000, 52000), (20000, 20000)]):
        TelemetrySample.objects.create(
            workspace=ws,
            at=at.replace(minute=0) + timedelta(minutes=minutes),
            gpu_util=50,
            gpu_mem_used_mib=total_used,
            gpu_mem_max_mib=top,
            gpu_mem_total_mib=GPU_MIB,
            gpus_in_use=2,
        )
    assert telemetry_downsample(now=NOW) == 3
    hour = TelemetryHour.objects.get(workspace=ws)
    assert (hour.gpu_mem_max_mib, hour.gpu_mem_sum_mib) == (50000, 52000)
    assert (hour.gpu_mem_total_mib, hour.gpus_in_use_max) == (GPU_MIB, 2)


# -- one advice per rule ------------------------------------------------------------------------


def test_a_smaller_size_when_the_peak_fits_a_cheaper_gpu_with_its_margin(cast, catalog):
    ws = _workspace(cast)
    _hours(ws, mem=12288)  # 12 GiB: with 20 % it needs 14.4 GiB, a T4 has 16
    r = _advise(ws)
    assert (r.advice, r.target_vm_size) == (Advice.SMALLER, T4)
    # (3.6730 - 0.5260) USD/hour x 730 hours
    assert r.saving_usd_month == Decimal("2297.31")
    assert (r.peak_mib, r.p95_mib, r.hours) == (12288, 12288, 24)


def test_never_a_size_that_would_not_hold_the_peak_plus_the_margin(cast, catalog):
    ws = _workspace(cast)
    _hours(ws, mem=14000)  # fits a T4's 16 GiB, but not with 20 % on top (16.4 GiB)
    r = _advise(ws)
    assert r.target_vm_size != T4
    assert (r.advice, r.target_vm_size) == (Advice.SMALLER, A10)  # 24 GiB, the next cheapest


@pytest.mark.parametrize("peak_gib", [1, 3, 7, 9, 11, 13, 14, 16, 19, 20, 30, 40, 55, 66, 70])
def test_whatever_the_peak_the_target_holds_it_plus_the_margin(cast, catalog, peak_gib):
    _mig_pool(cast.team, "MIG1g")
    _mig_pool(cast.team, "MIG2g")
    ws = _workspace(cast)
    _hours(ws, mem=peak_gib * 1024)
    r = _advise(ws)
    if r.target:
        assert r.target_memory_mib >= peak_gib * 1024 * (1 + HEADROOM)


def test_a_mig_slice_when_the_peak_fits_one_and_it_is_cheapest(cast, catalog):
    _mig_pool(cast.team, "MIG1g")
    ws = _workspace(cast)
    _hours(ws, mem=6000)  # 7,200 MiB with the margin; 1g.10gb counts 9,536 MiB
    r = _advise(ws)
    assert (r.advice, r.target_kind, r.target_mig_profile) == (Advice.MIG, "mig", "1g.10gb")
    assert r.target_price_per_hour == Decimal("0.5247")  # 3.6730 / 7
    assert r.saving_usd_month == Decimal("2298.26")  # (3.6730 - 0.5247) x 730


def test_no_mig_slice_on_a_cluster_the_team_may_not_use(cast, catalog):
    pool = _mig_pool(cast.team, "MIG1g")
    ClusterTeam.objects.filter(cluster=pool.cluster).update(team=cast.other_team)
    ws = _workspace(cast)
    _hours(ws, mem=6000)
    assert _advise(ws).target_vm_size == T4


def test_fewer_gpus_when_one_gpu_of_two_holds_it(cast, catalog):
    ws = _workspace(cast, vm_size=A100X2, gpus=2, price="7.3460")
    _hours(ws, mem=40000, mem_sum=40500, in_use=1)
    r = _advise(ws)
    assert (r.advice, r.target_vm_size) == (Advice.FEWER_GPUS, A100)
    assert r.saving_usd_month == Decimal("2681.29")  # (7.3460 - 3.6730) x 730


def test_not_fewer_gpus_when_both_gpus_are_in_use(cast, catalog):
    ws = _workspace(cast, vm_size=A100X2, gpus=2, price="7.3460")
    _hours(ws, mem=30000, mem_sum=60000, in_use=2)
    r = _advise(ws)
    assert r.advice == Advice.FINE and r.target == ""


def _spot_price(vm_size, price):
    Price.objects.create(
        kind="vm",
        sku=vm_size,
        region="eastus",
        spot=True,
        unit_price=Decimal(price),
        unit="1 Hour",
        effective_start=NOW - timedelta(days=90),
        source="api",
        synced_at=NOW - timedelta(days=90),
    )


def test_spot_for_busy_work_nobody_is_logged_in_to(cast, catalog):
    _spot_price(A100, "1.1019")
    ws = _workspace(cast)
    _hours(ws, mem=60000, util=95, interactive=0)  # only an A100 holds 72,000 MiB
    r = _advise(ws)
    assert (r.advice, r.target, r.target_price_per_hour) == (Advice.SPOT, "", Decimal("1.1019"))
    assert r.saving_usd_month == Decimal("1876.90")  # (3.6730 - 1.1019) x 730


def test_no_spot_for_interactive_work_or_a_workspace_already_on_spot(cast, catalog):
    _spot_price(A100, "1.1019")
    attended = _workspace(cast)
    _hours(attended, mem=60000, util=95, interactive=2)
    spot = _workspace(cast, spot=True, price="1.1019")
    _hours(spot, mem=60000, util=95, interactive=0)
    recommendations_refresh(now=NOW)
    assert Recommendation.objects.get(workspace=attended).advice == Advice.FINE
    assert Recommendation.objects.get(workspace=spot).advice == Advice.FINE


def test_larger_when_memory_is_at_the_ceiling(cast, catalog):
    ws = _workspace(cast)
    _hours(ws, mem=[60000] * 23 + [79000])  # 96 % of 80 GiB in one hour
    r = _advise(ws)
    assert (r.advice, r.target_vm_size) == (Advice.LARGER, H100)  # 94 GiB >= 79,000 x 1.2
    assert r.saving_usd_month == Decimal("-2414.11")  # costs (6.9800 - 3.6730) x 730 more
    assert r.peak_mib == 79000 and r.p95_mib == 60000


def test_larger_names_no_size_when_the_region_has_none_big_enough(cast):
    OfferingFactory(vm_size=A100, price_per_hour=Decimal("3.6730"))
    ws = _workspace(cast)
    _hours(ws, mem=80000)
    r = _advise(ws)
    assert (r.advice, r.target, r.saving_usd_month) == (Advice.LARGER, "", Decimal("0.00"))


def test_fine_when_nothing_cheaper_holds_it(cast, catalog):
    ws = _workspace(cast)
    _hours(ws, mem=50000)
    r = _advise(ws)
    assert (r.advice, r.saving_usd_month) == (Advice.FINE, Decimal("0.00"))


def test_the_mean_utilisation_and_idle_hours(cast, catalog):
    ws = _workspace(cast)
    _hours(ws, 12, mem=50000, util=80)
    _hours(ws, 12, mem=50000, util=0, interactive=0, before=12)
    r = _advise(ws)
    assert (r.util_mean, r.idle_hours, r.hours) == (Decimal("40.0"), 12, 24)


def test_p95_interpolates_between_the_nearest_hours_as_percentile_cont(cast, catalog):
    ws = _workspace(cast)
    # 24 hours: 1,000 .. 24,000 MiB. Rank 0.95 x 23 = 21.85: 22,000 + 0.85 x 1,000.
    _hours(ws, mem=[1000 * (i + 1) for i in range(24)])
    r = _advise(ws)
    assert (r.peak_mib, r.p95_mib) == (24000, 22850)
    assert percentile_cont([1000 * (i + 1) for i in range(20)], 0.95) == pytest.approx(19050)


# -- the threshold and the hourly fold ----------------------------------------------------------


def test_no_advice_before_24_hours_of_telemetry(cast, catalog):
    ws = _workspace(cast)
    _hours(ws, 23, mem=12288)
    recommendations_refresh(now=NOW)
    assert not Recommendation.objects.filter(workspace=ws).exists()


def test_the_last_complete_hour_counts_once_the_hourly_fold_ran(cast, catalog):
    ws = _workspace(cast)
    _hours(ws, 23, mem=8000)
    TelemetrySample.objects.create(  # in the hour before NOW, not yet 48 hours old
        workspace=ws,
        at=NOW - timedelta(minutes=50),
        gpu_util=50,
        gpu_mem_used_mib=14000,
        gpu_mem_max_mib=14000,
        gpu_mem_total_mib=GPU_MIB,
        gpus_in_use=1,
    )
    recommendations_refresh(now=NOW)
    assert not Recommendation.objects.exists()  # 23 hours
    telemetry_downsample(now=NOW)
    r = _advise(ws)
    assert (r.hours, r.peak_mib) == (24, 14000)
    assert r.target_vm_size == A10  # 14,000 x 1.2 no longer fits a T4
    assert TelemetrySample.objects.filter(workspace=ws).exists()  # kept 48 hours


@pytest.mark.skipif(connection.vendor != "postgresql", reason="percentile_cont is PostgreSQL's")
def test_the_sql_and_the_python_reference_agree(cast):
    import random

    rnd = random.Random(18)
    for n in range(8):
        ws = _workspace(cast)
        hours = 20 + n * 5
        start = NOW.replace(minute=0) - timedelta(hours=hours + 1)
        TelemetryHour.objects.bulk_create(
            TelemetryHour(
                workspace=ws,
                hour=start + timedelta(hours=i),
                samples=rnd.randrange(1, 121),
                gpu_util_avg=rnd.choice([None, 0, 2, 37, 80]),
                gpu_util_max=rnd.choice([None, 0, 4, 5, 60, 100]),
                interactive_max=rnd.choice([0, 0, 1, 3]),
                gpu_mem_max_mib=rnd.choice([None, rnd.randrange(0, GPU_MIB)]),
                gpu_mem_sum_mib=rnd.randrange(0, 2 * GPU_MIB),
                gpu_mem_total_mib=rnd.choice([None, 0, GPU_MIB]),
                gpus_in_use_max=rnd.choice([None, 0, 1, 2]),
            )
            for i in range(hours)
        )
    since, until = NOW - timedelta(days=30), NOW
    python = usage_python(since=since, until=until, min_hours=24)
    assert len(python) == 7  # 20 hours is too few
    assert usage_sql(since=since, until=until, min_hours=24) == python


# -- the pages ----------------------------------------------------------------------------------


def test_the_workspace_page_shows_what_was_measured_the_advice_and_the_saving(
    client, cast, catalog
):
    ws = _workspace(cast)
    _hours(ws, mem=12288, util=35)
    recommendations_refresh(now=NOW)
    client.force_login(cast.researcher)
    page = client.get(reverse("workspaces:detail", kwargs={"pk": ws.pk})).content.decode()
    assert "Right-sizing" in page
    assert '<span data-testid="peak">12.0 GiB</span>' in page
    assert "35.0%" in page
    assert f"A smaller size: {T4}" in page
    assert '<strong data-testid="saving">$2,297.31</strong>' in page
    resize = reverse("workspaces:resize", kwargs={"pk": ws.pk})
    assert f'<form method="post" action="{resize}">' in page
    assert f'value="{T4}">' in page and f"Resize to {T4}</button>" in page
    client.force_login(cast.teammate)  # sees the workspace, may not resize it
    page = client.get(reverse("workspaces:detail", kwargs={"pk": ws.pk})).content.decode()
    assert f"A smaller size: {T4}" in page and "Resize to" not in page


def test_no_resize_button_for_advice_of_another_kind(client, cast, catalog):
    _mig_pool(cast.team, "MIG1g")
    ws = _workspace(cast)
    _hours(ws, mem=6000)  # a MIG slice: another kind of workspace, not a resize of this VM
    recommendations_refresh(now=NOW)
    client.force_login(cast.researcher)
    page = client.get(reverse("workspaces:detail", kwargs={"pk": ws.pk})).content.decode()
    assert "A MIG slice: 1g.10gb" in page and "Resize to" not in page


def test_the_workspace_page_says_when_advice_will_come(client, cast, catalog):
    ws = _workspace(cast)
    client.force_login(cast.researcher)
    page = client.get(reverse("workspaces:detail", kwargs={"pk": ws.pk})).content.decode()
    assert "Advice comes once the workspace has 24 hours of telemetry" in page


@pytest.fixture
def three_savings(cast, catalog):
    """Three workspaces of the team: a T4 saving, an A10 saving, one to grow; and one of
    the other team."""
    small, medium, large = _workspace(cast), _workspace(cast), _workspace(cast)
    _hours(small, mem=12288)
    _hours(medium, mem=14000)
    _hours(large, mem=80000)
    theirs = WorkspaceFactory(
        team=cast.other_team,
        owner=cast.outsider,
        status=Status.RUNNING,
        gpu_model="A100",
        gpu_count=1,
    )
    _hours(theirs, mem=12288)
    recommendations_refresh(now=NOW)
    return small, medium, large


def test_the_team_savings_page_ranks_by_usd(client, cast, three_savings):
    small, medium, large = three_savings
    client.force_login(cast.team_admin)
    response = client.get(reverse("team-savings", kwargs={"slug": "vision"}))
    assert response.status_code == 200
    page = response.content.decode()
    names = [small.name, medium.name, large.name]
    assert [page.index(f">{n}</a>") for n in names] == sorted(
        page.index(f">{n}</a>") for n in names
    )
    # 2,297.31 + (3.6730 - 3.2000) x 730 = 345.29; the larger size is listed, not subtracted
    assert '<strong data-testid="savings-total">$2,642.60</strong>' in page
    assert "costs $2,414.11 more" in page


def test_the_team_savings_page_is_its_admins(client, cast, three_savings):
    url = reverse("team-savings", kwargs={"slug": "vision"})
    client.force_login(cast.researcher)
    assert client.get(url).status_code == 403
    client.force_login(cast.outsider)
    assert client.get(url).status_code == 404
    client.force_login(cast.platform_admin)
    assert client.get(url).status_code == 200


def test_the_team_savings_page_is_paged_and_htmx_gets_the_table(client, cast, catalog):
    for _ in range(26):
        _hours(_workspace(cast), mem=12288)
    recommendations_refresh(now=NOW)
    client.force_login(cast.team_admin)
    url = reverse("team-savings", kwargs={"slug": "vision"})
    first = client.get(url).content.decode()
    assert first.count('data-testid="savings-row"') == 25 and "Page 1 of 2 (26)" in first
    second = client.get(url, {"page": 2}, HTTP_HX_REQUEST="true").content.decode()
    assert second.count('data-testid="savings-row"') == 1 and "<h1>" not in second
    for junk in ("\x00", "-1", "9" * 40, "two"):
        assert client.get(url, {"page": junk}).status_code == 200


def test_the_platform_savings_page_totals_every_team(client, cast, three_savings):
    client.force_login(cast.platform_admin)
    page = client.get(reverse("platform-savings")).content.decode()
    assert '<strong data-testid="savings-total">$4,939.91</strong>' in page  # 2,642.60 + 2,297.31
    assert page.index("Vision Lab") < page.index(">NLP<")
    client.force_login(cast.team_admin)
    assert client.get(reverse("platform-savings")).status_code == 403


# -- the digest and the beat task ---------------------------------------------------------------


def test_the_weekly_digest_tells_team_admins_the_total_and_the_top_savings(
    cast, three_savings, django_capture_on_commit_callbacks
):
    from billing.tasks import send_savings_digest

    IdlePolicy.objects.create(team=cast.team, timezone="Europe/Berlin")
    mail.outbox.clear()
    with (
        time_machine.travel(NOW + timedelta(days=6), tick=False),  # Monday 30 Nov
        django_capture_on_commit_callbacks(execute=True),
    ):
        assert send_savings_digest.delay().get() == 2
    vision = [m for m in mail.outbox if "Vision Lab" in m.subject]
    assert [m.to for m in vision] == [["victor@example.org"]]  # its admin, not its researchers
    (message,) = vision
    assert message.subject == "Vision Lab could save $2,642.60 a month"
    small, medium, _ = three_savings
    body = message.body
    assert f"- {small.name}: A smaller size ({T4}), $2,297.31 a month" in body
    assert f"- {medium.name}: A smaller size ({A10}), $345.29 a month" in body
    assert "30 Nov 2026 05:40 CET" in body  # the team's time zone
    assert [m.to for m in mail.outbox if "NLP" in m.subject] == [["nora@example.org"]]


def test_the_beat_task_refreshes_and_forgets_deleted_workspaces(cast, catalog):
    from billing.tasks import refresh_recommendations
    from portal.celery import _beat_schedule, app

    _beat_schedule(app)
    assert app.conf.beat_schedule["refresh-recommendations"]["task"] == (
        "billing.tasks.refresh_recommendations"
    )
    assert app.conf.beat_schedule["savings-digest"]["task"] == "billing.tasks.send_savings_digest"
    kept, gone = _workspace(cast), _workspace(cast)
    _hours(kept, mem=12288)
    _hours(gone, mem=12288)
    with time_machine.travel(NOW, tick=False):
        assert refresh_recommendations.delay().get() == {"advised": 2, "removed": 0}
        gone.status = Status.DELETED
        gone.save()
        assert refresh_recommendations.delay().get() == {"advised": 1, "removed": 1}
    assert list(Recommendation.objects.values_list("workspace_id", flat=True)) == [kept.pk]


def test_the_refresh_costs_the_same_queries_for_more_workspaces(cast, catalog):
    _mig_pool(cast.team)
    other = TeamFactory()
    Membership.objects.create(team=other, user=UserFactory(), role=Role.TEAM_ADMIN)

    def queries(n):
        for _ in range(n):
            _hours(_workspace(cast), mem=12288)
        with CaptureQueriesContext(connection) as ctx:
            recommendations_refresh(now=NOW)
        return len(ctx.captured_queries)

    assert queries(3) == queries(30)


def test_from_the_agents_heartbeats_to_the_advice(client, cast, catalog):
    """Two A100s, one holding 12,000 MiB and one idle: the fullest GPU, not the sum over
    both, is what a size must hold, and one GPU in use lets one smaller GPU take it."""
    import json

    from django.utils import timezone

    from workspaces.telemetry import agent_token_issue

    ws = _workspace(cast, vm_size=A100X2, gpus=2, price="7.3460")
    start = NOW - timedelta(hours=26)
    token = agent_token_issue(workspace_id=ws.pk, now=start)
    gpus = [
        {
            "index": i,
            "name": "NVIDIA A100 80GB PCIe",
            "util_percent": u,
            "mem_used_mib": m,
            "mem_total_mib": GPU_MIB,
            "processes": 1,
            "mig_profile": None,
        }
        for i, u, m in ((0, 70, 12000), (1, 0, 300))
    ]
    for h in range(26):
        at = start + timedelta(hours=h, minutes=30)
        body = {
            "samples": [
                {
                    "at": at.isoformat().replace("+00:00", "Z"),
                    "nvml": "ok",
                    "gpus": gpus,
                    "ssh_sessions": 1,
                }
            ]
        }
        with time_machine.travel(at, tick=False):
            answer = client.post(
                reverse("agent-heartbeat", args=[ws.pk]),
                json.dumps(body),
                content_type="application/json",
                headers={"Authorization": f"Bearer {token}"},
            )
            assert answer.status_code == 202
        with time_machine.travel(at + timedelta(minutes=40), tick=False):
            telemetry_downsample(now=timezone.now())  # the hourly beat
    r = _advise(ws)
    # 26 hours reported; the 26th is not complete yet, so not folded.
    assert (r.hours, r.peak_mib, r.gpus_in_use, r.memory_mib) == (25, 12000, 1, GPU_MIB)
    assert (r.advice, r.target_vm_size) == (Advice.SMALLER, T4)
    assert r.saving_usd_month == Decimal("4978.60")  # (7.3460 - 0.5260) x 730


def test_nothing_is_proposed_without_gpu_memory_measured(cast, catalog):
    ws = _workspace(cast)
    _hours(ws, mem=None, total=None)  # NVML unavailable on the VM
    r = _advise(ws)
    assert (r.advice, r.target, r.saving_usd_month) == (Advice.FINE, "", Decimal("0.00"))
    assert "no GPU memory" in r.reason


def test_a_fractional_a10_for_small_work_by_its_partitions_memory(cast, catalog):
    # Standard_NV6ads_A10_v5: 1/6 of an A10, 4 GiB of GPU memory, $0.454/hour in eastus.
    OfferingFactory(
        vm_size="Standard_NV6ads_A10_v5",
        gpu_model="A10",
        gpu_memory_gib=4,
        gpu_partition=6,
        vcpus=6,
        price_per_hour=Decimal("0.4540"),
    )
    small, bigger = _workspace(cast), _workspace(cast)
    _hours(small, mem=3000)  # 3,600 MiB with the margin: fits 4 GiB
    _hours(bigger, mem=3500)  # 4,200 MiB: does not, though 3,500 would
    recommendations_refresh(now=NOW)
    r = Recommendation.objects.get(workspace=small)
    assert (r.advice, r.target_vm_size, r.target_memory_mib) == (
        Advice.SMALLER,
        "Standard_NV6ads_A10_v5",
        4096,
    )
    assert r.saving_usd_month == Decimal("2349.87")  # (3.6730 - 0.4540) x 730
    assert Recommendation.objects.get(workspace=bigger).target_vm_size == T4


def test_the_team_savings_page_does_not_call_unmeasured_workspaces_fine(client, cast, catalog):
    _workspace(cast)  # running, but no telemetry: not measured
    recommendations_refresh(now=NOW)
    client.force_login(cast.team_admin)
    page = client.get(reverse("team-savings", kwargs={"slug": "vision"})).content.decode()
    assert "fine as is" not in page
    assert "No workspace measured yet" in page
    assert '<span data-testid="savings-measured">0</span> measured' in page


def test_the_team_savings_page_counts_the_measured_workspaces_that_are_fine(client, cast, catalog):
    _hours(_workspace(cast), mem=50000)  # nothing cheaper holds it: fine as is
    recommendations_refresh(now=NOW)
    client.force_login(cast.team_admin)
    page = client.get(reverse("team-savings", kwargs={"slug": "vision"})).content.decode()
    assert "the one measured workspace is fine as is" in page
    assert '<span data-testid="savings-measured">1</span> measured' in page
