"""Graph's GET /v1.0/groups/{id}: what the portal asks before it links a team to a group."""

import pytest

from cloudsim.entra.directory import VISION_LAB

from .entra_helpers import Entra, call

SELECT = "id,displayName,securityEnabled"


@pytest.fixture
def graph(sim):
    """(Graph base URL, an app token from client_credentials)."""
    return f"{sim.url}/v1.0", Entra(sim.url).app_token()


def test_get_group_with_select(graph):
    base, token = graph

    status, _, body = call(f"{base}/groups/{VISION_LAB}?$select={SELECT}", token=token)

    assert status == 200
    assert body["@odata.context"].endswith(f"/v1.0/$metadata#groups({SELECT})/$entity")
    assert {k: v for k, v in body.items() if not k.startswith("@")} == {
        "id": VISION_LAB,
        "displayName": "Vision Lab",
        "securityEnabled": True,
    }


def test_a_microsoft_365_group_is_not_security_enabled(graph, ctl):
    base, token = graph
    added = ctl.entra_add(groups=[{"display_name": "Lunch", "security_enabled": False}])
    gid = added["groups"][0]["id"]

    status, _, body = call(f"{base}/groups/{gid}", token=token)

    assert status == 200
    assert (body["securityEnabled"], body["mailEnabled"], body["groupTypes"]) == (
        False,
        True,
        ["Unified"],
    )


def test_unknown_group_is_graphs_404(graph):
    base, token = graph
    missing = "9d3f1c2b-0000-4000-8000-000000000000"

    status, _, body = call(f"{base}/groups/{missing}?$select={SELECT}", token=token)

    assert (status, body["error"]["code"]) == (404, "Request_ResourceNotFound")
    assert f"'{missing}' does not exist" in body["error"]["message"]


def test_group_get_needs_a_token_and_takes_faults(graph, ctl):
    base, token = graph
    ctl.inject("graph.groups.get", "server_error")

    anonymous = call(f"{base}/groups/{VISION_LAB}")
    failed = call(f"{base}/groups/{VISION_LAB}", token=token)
    retried = call(f"{base}/groups/{VISION_LAB}", token=token)

    assert (anonymous[0], anonymous[2]["error"]["code"]) == (401, "InvalidAuthenticationToken")
    assert failed[0] == 500
    assert retried[0] == 200
