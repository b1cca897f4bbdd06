"""Tables read column by column: every row has a cell under each header, and a column of
figures aligned to the right has its header aligned to the right too, so a number never sits
under the next column's header (issue 29, item 18)."""

from html.parser import HTMLParser

import pytest
from django.urls import reverse

from tests.factories import WorkspaceFactory
from workspaces.states import Status

pytestmark = pytest.mark.django_db


class _Tables(HTMLParser):
    """Each <table>: its header cells and its body rows, each cell as (colspan, right-aligned)."""

    def __init__(self):
        super().__init__()
        self.tables: list[dict] = []
        self._row: list | None = None
        self._section = ""

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table":
            self.tables.append({"head": [], "body": []})
        elif tag in ("thead", "tbody"):
            self._section = tag
        elif tag == "tr" and self.tables:
            self._row = []
            target = self.tables[-1]["head" if self._section == "thead" else "body"]
            target.append(self._row)
        elif tag in ("td", "th") and self._row is not None:
            classes = (a.get("class") or "").split()
            self._row.append((int(a.get("colspan") or 1), "text-end" in classes))


def _tables(html: str) -> list[dict]:
    parser = _Tables()
    parser.feed(html)
    return [t for t in parser.tables if t["head"]]


def _assert_columns_line_up(html: str) -> int:
    tables = _tables(html)
    for table in tables:
        (head,) = table["head"]
        width = sum(span for span, _ in head)
        for row in table["body"]:
            assert sum(span for span, _ in row) == width, f"{row} under {head}"
            if len(row) == len(head):
                for column, ((_, header_right), (_, cell_right)) in enumerate(
                    zip(head, row, strict=True)
                ):
                    assert not cell_right or header_right, (
                        f"column {column}: figures aligned right under a header aligned left"
                    )
    return len(tables)


def test_the_team_pages_usage_figures_sit_under_their_own_headers(client, cast):
    WorkspaceFactory(team=cast.team, owner=cast.researcher, status=Status.RUNNING)
    client.force_login(cast.team_admin)
    html = client.get(reverse("team-detail", kwargs={"slug": cast.team.slug})).content.decode()
    assert "usage-h" in html
    assert _assert_columns_line_up(html) >= 2  # Usage and Members


def test_the_teams_overview_figures_sit_under_their_own_headers(client, cast):
    client.force_login(cast.platform_admin)
    html = client.get(reverse("team-list")).content.decode()
    assert _assert_columns_line_up(html) == 1
