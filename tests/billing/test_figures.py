"""One number for one figure: burn rate, GPUs in use, members and Azure headroom each come from
one selector with one rule, and every page that shows a team's figures shows the same numbers.

Pages mark each figure with ``data-figure`` (and ``data-team``, ``data-gpu-model``); the tests
read the number a person sees inside that element."""

import re
from datetime import UTC, datetime
from decimal import Decimal
from html.parser import HTMLParser

import pytest
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from billing.live_spend import team_burn_rate
from billing.models import Price
from teams.models import GpuQuota, QuotaRequest
from teams.selectors import team_member_count
from tests.factories import MembershipFactory, TeamFactory, UserFactory, WorkspaceFactory
from workspaces import states
from workspaces.selectors import team_gpus_in_use
from workspaces.states import Status

pytestmark = pytest.mark.django_db
A100 = "Standard_NC24ads_A100_v4"
PRICES_FROM = datetime(2026, 1, 1, tzinfo=UTC)
# From a status, the path a VM workspace takes to reach each status (after "requested").
PATHS = {
    Status.REQUESTED: [],
    Status.PROVISIONING: [Status.PROVISIONING],
    Status.RUNNING: [Status.PROVISIONING, Status.RUNNING],
    Status.STOPPING: [Status.PROVISIONING, Status.RUNNING, Status.STOPPING],
    Status.STOPPED: [Status.PROVISIONING, Status.RUNNING, Status.STOPPING, Status.STOPPED],
    Status.STARTING: [
        *[Status.PROVISIONING, Status.RUNNING, Status.STOPPING, Status.STOPPED],
        Status.STARTING,
    ],
    Status.DELETING: [
        *[Status.PROVISIONING, Status.RUNNING, Status.STOPPING, Status.STOPPED],
        Status.DELETING,
    ],
    Status.DELETED: [Status.PROVISIONING, Status.RUNNING, Status.DELETING, Status.DELETED],
    Status.FAILED: [Status.FAILED],
}


def prices():
    """A100 VM at $3.673/h; the P10 OS disk at $19.71/month = $0.027/h."""
    for kind, sku, unit, amount in (
        ("vm", A100, "1 Hour", "3.6730"),
        ("disk", "P10 LRS", "1/Month", "19.71"),
    ):
        Price.objects.create(
            kind=kind,
            sku=sku,
            region="eastus",
            spot=False,
            unit_price=Decimal(amount),
            unit=unit,
            effective_start=PRICES_FROM,
            source="api",
            synced_at=PRICES_FROM,
        )


def workspace(cast, status, *, team=None):
    """An A100 VM workspace of the team moved through the state machine to ``status``."""
    ws = WorkspaceFactory(
        team=team or cast.team, owner=cast.researcher, gpu_model="A100", gpu_count=1
    )
    at, current = timezone.now(), Status.REQUESTED
    for to in PATHS[status]:
        states.transition(workspace_id=ws.pk, expected=current, to=to, now=at)
        current = to
    return ws


def pending(cast, team=None):
    """A request above quota that waits for a platform admin."""
    ws = WorkspaceFactory(
        team=team or cast.team,
        owner=cast.researcher,
        gpu_model="A100",
        gpu_count=1,
        status=Status.PENDING_APPROVAL,
    )
    now = timezone.now()
    QuotaRequest.objects.create(
        team=ws.team,
        requester=cast.researcher,
        workspace=ws,
        summary="1 x A100",
        over_quota=["It needs 1 A100 GPU(s)."],
        justification="Deadline",
        price_per_hour=ws.price_per_hour,
        created_at=now,
        expires_at=now + timezone.timedelta(days=7),
    )
    return ws


def team_in_every_status(cast):
    """cast.team with one A100 VM in every status. What counts (the rules):
    GPUs in use: requested, provisioning, running, stopping, starting, and deleting until Azure
    confirms the delete = 6 A100.
    Burn: compute of running, stopping, starting (3 x $3.673: provisioning bills nothing until
    Azure says the create succeeded) and the OS disks of the VMs that ran and are not deleted
    (running, stopping, stopped, starting, deleting: 5 x $0.027) = $11.154/h."""
    prices()
    GpuQuota.objects.filter(team=cast.team, gpu_model="A100").update(gpus=8)
    for status in PATHS:
        workspace(cast, status)
    pending(cast)


class _Figures(HTMLParser):
    """(figure, team slug, GPU model) -> the text inside each element marked data-figure."""

    def __init__(self):
        super().__init__()
        self.found: dict[tuple, list[str]] = {}
        self._open: list[list] = []  # [key, depth, text parts]
        self._depth = 0

    def handle_starttag(self, tag, attrs):
        self._depth += 1
        a = dict(attrs)
        if "data-figure" in a:
            key = (a["data-figure"], a.get("data-team", ""), a.get("data-gpu-model", ""))
            self._open.append([key, self._depth, []])

    def handle_endtag(self, tag):
        if self._open and self._open[-1][1] == self._depth:
            key, _, parts = self._open.pop()
            self.found.setdefault(key, []).append(" ".join("".join(parts).split()))
        self._depth -= 1

    def handle_data(self, data):
        for entry in self._open:
            entry[2].append(data)


def figures(html: str) -> dict[tuple, list[str]]:
    parser = _Figures()
    parser.feed(html)
    return parser.found


def number(text: str) -> Decimal:
    """The first number a person reads in ``text``: "$14.8270/h" -> 14.8270, "5 / 8 A100" -> 5."""
    match = re.search(r"\d[\d,]*(?:\.\d+)?", text)
    assert match, text
    return Decimal(match.group().replace(",", ""))


def page(client, user, url):
    client.force_login(user)
    answer = client.get(url)
    assert answer.status_code == 200, url
    return answer.content.decode()


# --- the rules, one selector each ----------------------------------------------------------


def test_a_workspace_waiting_for_azure_holds_quota_but_burns_nothing(cast):
    prices()
    workspace(cast, Status.REQUESTED)
    now = timezone.now()
    assert team_gpus_in_use(team_ids=[cast.team.pk])[cast.team.pk] == {"A100": 1}
    assert team_burn_rate(team_ids=[cast.team.pk], now=now).get(cast.team.pk, 0) == 0


def test_a_stopped_vm_holds_no_gpus_and_burns_its_os_disk_only(cast):
    prices()
    workspace(cast, Status.STOPPED)
    now = timezone.now()
    assert team_gpus_in_use(team_ids=[cast.team.pk]).get(cast.team.pk, {}) == {}
    assert team_burn_rate(team_ids=[cast.team.pk], now=now)[cast.team.pk] == Decimal("0.027")


def test_pending_failed_and_deleted_workspaces_hold_and_burn_nothing(cast):
    prices()
    for status in (Status.FAILED, Status.DELETED):
        workspace(cast, status)
    pending(cast)
    now = timezone.now()
    assert team_gpus_in_use(team_ids=[cast.team.pk]).get(cast.team.pk, {}) == {}
    assert team_burn_rate(team_ids=[cast.team.pk], now=now).get(cast.team.pk, 0) == 0


def test_members_are_the_memberships_and_staff_only_with_one(cast):
    counts = team_member_count(team_ids=[cast.team.pk, cast.other_team.pk])
    assert counts == {cast.team.pk: 3, cast.other_team.pk: 2}  # pat (staff) is in neither
    MembershipFactory(team=cast.team, user=cast.platform_admin)
    assert team_member_count(team_ids=[cast.team.pk])[cast.team.pk] == 4


def test_a_team_admin_sees_every_member_counted_on_the_teams_list(client, cast):
    html = page(client, cast.team_admin, reverse("team-list"))
    assert [number(t) for t in figures(html)[("members", "vision", "")]] == [3]


def test_the_teams_list_runs_a_constant_number_of_queries(client, cast):
    from django.db import connection

    def queries():
        client.force_login(cast.platform_admin)
        with CaptureQueriesContext(connection) as ctx:
            assert client.get(reverse("team-list")).status_code == 200
        return len(ctx.captured_queries)

    prices()
    workspace(cast, Status.RUNNING)
    few = queries()
    for i in range(10):
        team = TeamFactory(name=f"Team {i}", slug=f"team-{i}")
        MembershipFactory(team=team, user=UserFactory(username=f"member-{i}"))
        workspace(cast, Status.RUNNING, team=team)
    assert queries() == few


# --- every page agrees ---------------------------------------------------------------------


def test_every_page_shows_the_same_figures_for_a_team_in_every_status(client, cast):
    team_in_every_status(cast)
    slug = cast.team.slug
    team_admin_pages = [
        reverse("team-list"),
        reverse("team-detail", args=[slug]),
        reverse("team-spend", args=[slug]),
    ]
    staff_pages = [
        *team_admin_pages,
        reverse("platform-spend"),
        reverse("approvals"),
        reverse("team-quota", args=[slug]),
    ]
    seen: dict[str, set] = {"burn-rate": set(), "gpus-in-use": set(), "gpus-left": set()}
    shown_on: dict[str, set] = {key: set() for key in seen}
    views = [(cast.team_admin, url) for url in team_admin_pages]
    views += [(cast.platform_admin, url) for url in staff_pages]
    views += [(cast.researcher, reverse("workspaces:request"))]
    views += [(cast.researcher, reverse("workspaces:request-mig"))]
    views += [(cast.researcher, reverse("workspaces:request-namespace"))]
    members_listed = None
    for user, url in views:
        html = page(client, user, url)
        for (figure, team, model), texts in figures(html).items():
            if team != slug or figure not in seen or model not in ("", "A100"):
                continue
            seen[figure].update(number(t) for t in texts)
            shown_on[figure].add(url)
        if url == reverse("team-detail", args=[slug]):
            members_listed = html.count('id="member-')

    # A rate per hour has four decimals everywhere (common.words.HOURLY_PLACES)
    assert seen["burn-rate"] == {Decimal("11.1540")}, shown_on["burn-rate"]
    assert seen["gpus-in-use"] == {Decimal(6)}, shown_on["gpus-in-use"]
    assert seen["gpus-left"] == {Decimal(2)}, shown_on["gpus-left"]  # of the quota of 8
    assert len(shown_on["burn-rate"]) == 5  # teams list, team page, limits, spend, all spend
    assert len(shown_on["gpus-in-use"]) == 4  # teams list, team page, approvals, limits
    assert len(shown_on["gpus-left"]) == 3  # the three request forms
    listed = figures(page(client, cast.team_admin, reverse("team-list")))
    assert [number(t) for t in listed[("members", slug, "")]] == [members_listed] == [3]


def test_the_budget_alert_and_the_spend_page_count_the_same_month(client, cast):
    """The month spend that budget alerts and the request form's budget sentence use
    (billing.month_spend.team_spend) is the spend page's month to date."""
    from billing.month_spend import team_spend

    team_in_every_status(cast)
    spent = team_spend(team_ids=[cast.team.pk], now=timezone.now())[cast.team.pk].spent
    html = page(client, cast.team_admin, reverse("team-spend", args=[cast.team.slug]))
    total = re.search(r'data-testid="spend-total">\$([\d,.]+)<', html).group(1)
    assert Decimal(total.replace(",", "")) == spent


# --- Azure headroom --------------------------------------------------------------------------

A100_FAMILY = "standardNCADSA100v4Family"


def _advance_until(ws, status):
    from workspaces.operations import workspace_advance

    for _ in range(200):
        workspace_advance(workspace_id=ws.pk, clock=timezone.now)
        ws.refresh_from_db()
        if ws.status == status:
            return
    raise AssertionError(f"{ws.name} is {ws.status}")


def test_azure_headroom_is_read_again_once_the_portal_makes_or_deletes_a_vm(cast, sim):
    from workspaces.azure import azure_headroom

    sim.set_quota("eastus", A100_FAMILY, 100)
    assert azure_headroom(region="eastus", vm_size=A100).vcpus_left == 100
    ws = workspace(cast, Status.REQUESTED)
    _advance_until(ws, Status.RUNNING)
    assert azure_headroom(region="eastus", vm_size=A100).vcpus_left == 76
    states.transition(
        workspace_id=ws.pk, expected=Status.RUNNING, to=Status.DELETING, now=timezone.now()
    )
    _advance_until(ws, Status.DELETED)
    assert azure_headroom(region="eastus", vm_size=A100).vcpus_left == 100


# --- one rule for money: a rate per hour has four decimals, every other amount two ---------

HOURLY = re.compile(r"\$([\d,]+)\.(\d+)(?:</[a-z]+>)?(?:/h\b|/hour| per hour)")


def test_every_rate_per_hour_has_four_decimals_on_every_page(client, cast):
    """Issue 29 #6: one VM page said "$3.67 per hour", "Costs now $3.700 per hour" and
    "$3.6730"; the rule (README, Money and numbers) is four decimals for any rate per hour."""
    prices()
    ws = workspace(cast, Status.RUNNING)
    ws.price_per_hour = Decimal("3.6730")
    ws.save(update_fields=["price_per_hour"])
    urls = [
        reverse("workspaces:list"),
        reverse("workspaces:detail", kwargs={"pk": ws.pk}),
        reverse("team-list"),
        reverse("team-detail", kwargs={"slug": cast.team.slug}),
        reverse("team-spend", kwargs={"slug": cast.team.slug}),
    ]
    rates = {}
    for url in urls:
        for _whole, places in HOURLY.findall(page(client, cast.team_admin, url)):
            rates.setdefault(len(places), set()).add(url)
    assert set(rates) == {4}, rates
    detail = page(client, cast.team_admin, urls[1])
    assert "$3.6730 per hour while running" in detail
    assert "$3.7000 per hour, of which $0.0270 for its OS disk" in detail
    listed = page(client, cast.team_admin, urls[0])
    assert '<td class="num text-end">$3.6730</td>' in listed
