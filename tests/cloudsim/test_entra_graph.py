"""Microsoft Graph subset: users, group members (paged), getMemberObjects, throttling."""

import pytest

from cloudsim.entra.directory import NLP_GROUP, VISION_LAB, demo_oid

from .entra_helpers import Entra, call


@pytest.fixture
def graph(sim):
    """(Graph base URL, an app token from client_credentials)."""
    return f"{sim.url}/v1.0", Entra(sim.url).app_token()


def test_graph_needs_a_token(graph):
    base, _ = graph
    status, _, body = call(f"{base}/users")

    assert (status, body["error"]["code"]) == (401, "InvalidAuthenticationToken")
    assert {"date", "request-id", "client-request-id"} <= body["error"]["innerError"].keys()


def test_get_user_with_select(graph):
    base, token = graph
    fields = "id,accountEnabled,userPrincipalName,displayName"

    status, _, body = call(f"{base}/users/{demo_oid('eve')}?$select={fields}", token=token)

    assert status == 200
    assert body["@odata.context"].endswith(f"/v1.0/$metadata#users({fields})/$entity")
    assert {k: body[k] for k in ("id", "accountEnabled", "userPrincipalName")} == {
        "id": demo_oid("eve"),
        "accountEnabled": False,
        "userPrincipalName": "eve@example.org",
    }
    assert "mail" not in body


def test_get_user_by_upn_and_unknown_user(graph):
    base, token = graph

    found = call(f"{base}/users/alice@example.org", token=token)
    missing = call(f"{base}/users/nobody@example.org", token=token)

    assert found[0] == 200 and found[2]["id"] == demo_oid("alice")
    assert (missing[0], missing[2]["error"]["code"]) == (404, "Request_ResourceNotFound")


def test_get_member_objects(graph, ctl):
    base, token = graph
    ctl.entra_add(groups=[{"display_name": "extra", "id": "g-extra", "members": ["alice"]}])

    status, _, body = call(
        f"{base}/users/{demo_oid('alice')}/getMemberObjects",
        "POST",
        body={"securityEnabledOnly": True},
        token=token,
    )

    assert status == 200
    assert body["@odata.context"].endswith("/v1.0/$metadata#Collection(Edm.String)")
    assert body["value"] == [VISION_LAB, "g-extra"]


def test_group_members_page_through_next_link(graph, ctl):
    base, token = graph
    users = [{"name": f"u{i:03}"} for i in range(25)]
    ctl.entra_add(
        users=users,
        groups=[{"display_name": "big", "id": "g-big", "members": [u["name"] for u in users]}],
    )
    url, pages, seen = f"{base}/groups/g-big/members?$select=id,userPrincipalName&$top=10", 0, []

    while url:
        status, _, body = call(url, token=token)
        assert status == 200, body
        seen += [m["userPrincipalName"] for m in body["value"]]
        assert all(m["@odata.type"] == "#microsoft.graph.user" for m in body["value"])
        assert all(set(m) == {"@odata.type", "id", "userPrincipalName"} for m in body["value"])
        url, pages = body.get("@odata.nextLink"), pages + 1

    assert pages == 3
    assert seen == [f"u{i:03}@example.org" for i in range(25)]


def test_list_users_is_paged(graph, ctl):
    base, token = graph
    ctl.entra_add(users=[{"name": f"bulk{i}"} for i in range(150)])

    status, _, first = call(f"{base}/users?$select=id,accountEnabled", token=token)
    _, _, second = call(first["@odata.nextLink"], token=token)

    assert status == 200 and len(first["value"]) == 100  # Graph's default page size.
    assert len(second["value"]) == 6 + 150 - 100 and "@odata.nextLink" not in second


def test_removed_member_and_disabled_user_show_in_graph(graph, ctl):
    base, token = graph
    ctl.entra_remove_member(NLP_GROUP, "bob@example.org")
    ctl.entra_disable_user("nora@example.org")

    url = f"{base}/groups/{NLP_GROUP}/members?$select=id,accountEnabled"
    _, _, members = call(url, token=token)

    assert members["value"] == [
        {"@odata.type": "#microsoft.graph.user", "id": demo_oid("nora"), "accountEnabled": False}
    ]


def test_throttle_fault_is_429_with_retry_after(graph, ctl):
    base, token = graph
    ctl.inject("graph.groups.members", "throttle", retry_after=9)

    throttled = call(f"{base}/groups/{VISION_LAB}/members", token=token)
    retried = call(f"{base}/groups/{VISION_LAB}/members", token=token)

    assert (throttled[0], throttled[1]["retry-after"]) == (429, "9")
    assert throttled[2]["error"]["code"] == "TooManyRequests"
    assert retried[0] == 200 and len(retried[2]["value"]) == 3  # alice, victor, eve.


def test_graph_faults_take_only_graph_kinds(ctl):
    from cloudsim import SimControlError

    with pytest.raises(SimControlError) as refused:
        ctl.inject("graph.users.list", "quota")

    assert refused.value.status == 400


def test_a_benchmark_sized_directory_loads_and_syncs(graph, ctl):
    base, token = graph
    users = [{"name": f"r{i:04}"} for i in range(2000)]
    groups = [
        {
            "display_name": f"team{g:03}",
            "id": f"g{g:03}",
            "members": [f"r{i:04}" for i in range(g * 10, g * 10 + 10)],
        }
        for g in range(200)
    ]
    ctl.entra_add(users=users, groups=groups)

    _, _, page = call(f"{base}/groups/g199/members?$select=id,userPrincipalName", token=token)
    _, _, listed = call(f"{base}/users?$select=id&$top=999", token=token)

    assert [m["userPrincipalName"] for m in page["value"]][-1] == "r1999@example.org"
    assert len(listed["value"]) == 999 and "@odata.nextLink" in listed


def test_adding_a_user_twice_is_a_conflict(ctl):
    from cloudsim import SimControlError

    with pytest.raises(SimControlError) as refused:
        ctl.entra_add(users=[{"name": "alice"}])

    assert refused.value.status == 409
