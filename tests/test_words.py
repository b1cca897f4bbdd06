"""Words and figures as a user reads them (issue 29): a MIG slice's size is its profile on
every page, API answer and CLI line; plurals follow the count; empty states say what to do."""

import pytest
from django.urls import reverse

from api.schemas import workspace_out
from cli.gpuportal.render import size_of
from tests.factories import WorkspaceFactory
from workspaces.models import Kind

pytestmark = pytest.mark.django_db
A100 = "Standard_NC24ads_A100_v4"


def mig_slice(cast, **fields):
    return WorkspaceFactory(
        team=cast.team,
        owner=cast.researcher,
        kind=Kind.MIG,
        vm_size=A100,
        gpu_model="A100",
        mig_profile="1g.10gb",
        gpu_slices=1,
        **fields,
    )


def test_a_mig_slice_shows_its_profile_not_its_node_size_on_the_list_api_and_cli(client, cast):
    ws = mig_slice(cast, name="slice-one")
    client.force_login(cast.researcher)
    html = client.get(reverse("workspaces:list")).content.decode()
    row = html[html.index("slice-one") :].split("</tr>")[0]
    assert "A100 1g.10gb" in row
    assert A100 not in row
    answer = workspace_out(ws)
    assert answer["size_label"] == "A100 1g.10gb"
    assert size_of(answer) == "A100 1g.10gb"


def test_a_namespace_names_its_gpu_quota_with_the_right_plural(cast):
    one = WorkspaceFactory(team=cast.team, kind=Kind.NAMESPACE, gpu_model="A100", gpu_count=1)
    two = WorkspaceFactory(team=cast.team, kind=Kind.NAMESPACE, gpu_model="A100", gpu_count=2)
    assert one.size_label == "1 × A100 GPU"
    assert two.size_label == "2 × A100 GPUs"
