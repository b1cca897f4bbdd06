"""List pages as a user sees them at scale: paged, searchable, filterable and sortable, with
the filters and sort in the URL, a cursor that cannot be forged into a 500, and a number of
queries that does not grow with the rows."""

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from common.listing import DEFAULT_PAGE_SIZE
from tests.factories import OfferingFactory, WorkspaceFactory
from workspaces.states import Status

pytestmark = pytest.mark.django_db


def _names(html: str) -> list[str]:
    """Workspace names in the list's rows, top to bottom."""
    return re.findall(r'<td><a href="/workspaces/[0-9a-f-]{36}/">([^<]+)</a></td>', html)


def _next_link(html: str) -> str | None:
    found = re.search(r'<a class="page-link" rel="next" href="([^"]+)"', html)
    return found.group(1).replace("&amp;", "&") if found else None


def _many(cast, count: int, **fields):
    start = timezone.now() - timedelta(days=1)
    return [
        WorkspaceFactory(
            team=cast.team,
            owner=cast.researcher,
            name=f"ws-{i:03d}",
            created_at=start + timedelta(minutes=i),
            **fields,
        )
        for i in range(count)
    ]


def _get(client, user, url="", **params):
    client.force_login(user)
    return client.get(url or reverse("workspaces:list"), params)


def test_the_list_shows_one_page_and_a_next_link_that_walks_every_row_once(client, cast):
    _many(cast, DEFAULT_PAGE_SIZE * 2 + 5)
    seen, url = [], reverse("workspaces:list")
    client.force_login(cast.researcher)
    while url:
        html = client.get(url).content.decode()
        rows = _names(html)
        assert 0 < len(rows) <= DEFAULT_PAGE_SIZE
        seen += rows
        link = _next_link(html)
        url = reverse("workspaces:list") + link if link else None
    assert len(seen) == DEFAULT_PAGE_SIZE * 2 + 5 == len(set(seen))
    assert seen[0] == "ws-104"  # newest first


def test_paging_keeps_the_filter_and_sort(client, cast):
    OfferingFactory(region="westus2")
    _many(cast, DEFAULT_PAGE_SIZE + 3, region="westus2")
    _many(cast, 3, region="eastus")  # other rows, same names: never shown
    html = _get(client, cast.researcher, region="westus2", sort="name").content.decode()
    assert _names(html)[:2] == ["ws-000", "ws-001"]
    link = _next_link(html)
    assert "region=westus2" in link and "sort=name" in link
    second = client.get(reverse("workspaces:list") + link).content.decode()
    assert _names(second) == ["ws-050", "ws-051", "ws-052"]


def test_a_tampered_cursor_shows_the_first_page(client, cast):
    _many(cast, DEFAULT_PAGE_SIZE + 1)
    html = _get(client, cast.researcher).content.decode()
    link = _next_link(html)
    cursor = re.search(r"cursor=([^&]+)", link).group(1)
    for bad in (cursor[:-2] + "xx", "garbage", "", "a" * 5000, cursor + ":"):
        response = _get(client, cast.researcher, cursor=bad)
        assert response.status_code == 200
        assert _names(response.content.decode())[0] == "ws-050"


def test_a_cursor_of_another_sort_shows_the_first_page(client, cast):
    _many(cast, DEFAULT_PAGE_SIZE + 1)
    link = _next_link(_get(client, cast.researcher).content.decode())
    cursor = re.search(r"cursor=([^&]+)", link).group(1)
    html = _get(client, cast.researcher, cursor=cursor, sort="name").content.decode()
    assert _names(html)[0] == "ws-000"


def test_search_finds_by_name_and_owner(client, cast):
    WorkspaceFactory(team=cast.team, owner=cast.researcher, name="vision-t4-test")
    WorkspaceFactory(team=cast.team, owner=cast.teammate, name="llm-pretrain")
    assert _names(_get(client, cast.researcher, q="T4").content.decode()) == ["vision-t4-test"]
    assert _names(_get(client, cast.researcher, q="carol").content.decode()) == ["llm-pretrain"]


@pytest.mark.parametrize(
    "params,expected",
    [
        ({"status": Status.RUNNING}, ["running-one"]),
        ({"kind": "mig"}, ["mig-one"]),
        ({"gpu_model": "T4"}, ["t4-one"]),
        ({"region": "westeurope"}, ["t4-one"]),
        ({"owner": "carol"}, ["t4-one"]),
        ({"team": "vision"}, ["mig-one", "running-one", "t4-one"]),
    ],
)
def test_each_filter_narrows_the_list(client, cast, params, expected):
    OfferingFactory(vm_size="Standard_NC4as_T4_v3", region="westeurope", gpu_model="T4")
    WorkspaceFactory(
        team=cast.team,
        owner=cast.researcher,
        name="running-one",
        status=Status.RUNNING,
        gpu_model="A100",
    )
    WorkspaceFactory(team=cast.team, owner=cast.researcher, name="mig-one", kind="mig")
    WorkspaceFactory(
        team=cast.team, owner=cast.teammate, name="t4-one", gpu_model="T4", region="westeurope"
    )
    WorkspaceFactory(team=cast.other_team, owner=cast.outsider, name="nlp-one")
    html = _get(client, cast.platform_admin, sort="name", **params).content.decode()
    assert _names(html) == expected


def test_sorting_by_a_column_and_reversing_it(client, cast):
    for name, price in (("b", "2.00"), ("a", "3.00"), ("c", "1.00")):
        WorkspaceFactory(team=cast.team, owner=cast.researcher, name=name, price_per_hour=price)
    assert _names(_get(client, cast.researcher, sort="price").content.decode()) == ["c", "b", "a"]
    html = _get(client, cast.researcher, sort="-name").content.decode()
    assert _names(html) == ["c", "b", "a"]
    assert 'aria-sort="descending"' in html


@pytest.mark.parametrize("params", [{"status": "nonsense"}, {"team": "nlp"}, {"q": "a\x00b"}])
def test_a_refused_filter_is_a_form_error_and_the_rest_still_apply(client, cast, params):
    WorkspaceFactory(team=cast.team, owner=cast.researcher, name="mine")
    response = _get(client, cast.researcher, **params)
    html = response.content.decode()
    assert response.status_code == 200
    assert "invalid-feedback" in html and _names(html) == ["mine"]


def test_a_team_filter_never_shows_another_teams_workspaces(client, cast):
    WorkspaceFactory(team=cast.other_team, owner=cast.outsider, name="nlp-secret")
    html = _get(client, cast.researcher, team="nlp").content.decode()
    assert "nlp-secret" not in html


def test_htmx_gets_only_the_table(client, cast):
    WorkspaceFactory(team=cast.team, owner=cast.researcher, name="mine")
    client.force_login(cast.researcher)
    response = client.get(reverse("workspaces:list"), {"q": "mi"}, HTTP_HX_REQUEST="true")
    html = response.content.decode()
    assert html.lstrip().startswith('<section id="workspace-list"') and "<html" not in html


def test_deleted_workspaces_only_when_asked(client, cast):
    WorkspaceFactory(team=cast.team, owner=cast.researcher, name="gone", status=Status.DELETED)
    assert _names(_get(client, cast.researcher).content.decode()) == []
    assert _names(_get(client, cast.researcher, deleted="1").content.decode()) == ["gone"]
    html = _get(client, cast.researcher, status=Status.DELETED).content.decode()
    assert _names(html) == ["gone"]


def _queries(client, user, url) -> int:
    client.force_login(user)
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(url).status_code == 200
    return len(ctx.captured_queries)


def test_the_workspace_list_runs_as_many_queries_for_many_rows_as_for_few(client, cast):
    url = reverse("workspaces:list")
    _many(cast, 3)
    few = _queries(client, cast.platform_admin, url)
    _many(cast, DEFAULT_PAGE_SIZE * 3)
    assert _queries(client, cast.platform_admin, url) == few


@pytest.mark.parametrize("sort", ["status", "-status", "team", "-owner", "price", "-region"])
def test_paging_by_a_column_with_ties_shows_every_row_once(client, cast, sort):
    for i in range(DEFAULT_PAGE_SIZE + 10):
        owner = cast.researcher if i % 2 else cast.teammate
        WorkspaceFactory(team=cast.team, owner=owner, name=f"tie-{i:03d}",
                         status=(Status.RUNNING, Status.STOPPED)[i % 2])  # fmt: skip
    seen, pages, url = [], 0, f"{reverse('workspaces:list')}?sort={sort}"
    client.force_login(cast.platform_admin)
    while url:
        html = client.get(url).content.decode()
        seen, pages = seen + _names(html), pages + 1
        link = _next_link(html)
        url = reverse("workspaces:list") + link if link else None
    assert pages == 2 and len(seen) == DEFAULT_PAGE_SIZE + 10 == len(set(seen))
