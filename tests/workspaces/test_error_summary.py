"""A failed request shows its errors at the top, each linked to its field (issue 29 item 20:
the page reloaded at the top of a 3,200 px form with the errors at its bottom)."""

import re
import uuid

import pytest
from django.urls import reverse

from tests.clusters.test_aks_workspaces import cluster, make_pool  # noqa: F401
from tests.factories import OfferingFactory
from workspaces.models import Workspace

pytestmark = pytest.mark.django_db


def _summary(page: str) -> list[tuple[str, str]]:
    """(href, text) of each link of the error summary; it must come before the form."""
    start = page.index('id="error-summary"')
    assert start < page.index('<form method="post" class="card')
    block = page[start : page.index("</div>", start)]
    return re.findall(r'<a class="alert-link" href="([^"]*)">([^<]*)</a>', block)


def _ids(page: str) -> set[str]:
    return set(re.findall(r'\bid="([^"]+)"', page))


def test_a_failed_vm_request_lists_its_errors_at_the_top_linked_to_the_fields(client, cast):
    OfferingFactory()
    client.force_login(cast.researcher)
    response = client.post(
        reverse("workspaces:request"),
        {
            "team": cast.team.pk,
            "name": "Bad name!",
            "region": "eastus",
            "ssh_public_key": "not a key",  # optional, but when given it must be one
            "request_key": uuid.uuid4(),
        },
    )
    assert response.status_code == 200
    page = response.content.decode()
    links = _summary(page)
    hrefs = [href for href, _ in links]
    assert hrefs[:2] == ["#id_name", "#size-table"]  # the order of the form
    assert "#id_ssh_public_key" in hrefs
    assert all(href[1:] in _ids(page) for href in hrefs)  # each lands on its field
    assert links[0][1].startswith("Workspace name: ")
    assert "There are " in page and "problems" in page
    assert not Workspace.objects.exists()


def test_a_request_page_without_errors_has_no_summary(client, cast):
    client.force_login(cast.researcher)
    assert 'id="error-summary"' not in client.get(reverse("workspaces:request")).content.decode()


@pytest.mark.django_db(transaction=True)
def test_a_failed_mig_request_links_the_profile_to_its_table(client, cast, cluster):  # noqa: F811
    make_pool(cast, cluster)
    client.force_login(cast.researcher)
    response = client.post(
        reverse("workspaces:request-mig"),
        {"team": cast.team.pk, "name": "nb", "request_key": uuid.uuid4()},
    )
    page = response.content.decode()
    assert [href for href, _ in _summary(page)] == ["#choices"]
    assert "choices" in _ids(page)
