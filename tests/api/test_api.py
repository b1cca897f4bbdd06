"""The API's frame: its schema, its docs page, and problem details for a caller without a
token. The routes' own tests live beside their areas (test_api_*.py)."""

import pytest

pytestmark = pytest.mark.django_db


def test_openapi_schema_lists_the_api(client):
    response = client.get("/api/v1/openapi.json")
    assert response.status_code == 200
    schema = response.json()
    assert schema["openapi"].startswith("3.")
    assert schema["info"]["version"] == "1"
    assert "/api/v1/me" in schema["paths"]


def test_docs_page_is_served(client):
    response = client.get("/api/v1/docs")
    assert response.status_code == 200
    assert b"openapi.json" in response.content


def test_caller_without_token_gets_401_problem(client):
    response = client.get("/api/v1/me")
    assert response.status_code == 401
    assert response["Content-Type"] == "application/problem+json"
    assert response["WWW-Authenticate"].startswith("Bearer")
    body = response.json()
    assert body["status"] == 401 and body["title"] == "Unauthorized"


def test_signed_in_session_is_a_caller(client, cast):
    client.force_login(cast.researcher)
    response = client.get("/api/v1/me")
    assert response.status_code == 200
    assert response.json()["username"] == "alice"


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", "/api/v1/nothing-here"),
        ("get", "/api/v1/workspaces/not-a-uuid/deeper/still"),
        ("post", "/api/v1/nothing-here"),
        ("delete", "/api/v1/teams/vision/no-such-thing"),
    ],
)
def test_unknown_route_is_404_problem(client, cast, method, path):
    """As the API documents: problem+json, never the HTML 404 page, for the signed-in and
    for a caller without credentials alike."""
    for signed_in in (True, False):
        if signed_in:
            client.force_login(cast.researcher)
        else:
            client.logout()
        response = getattr(client, method)(path)
        assert response.status_code == 404
        assert response["Content-Type"] == "application/problem+json"
        body = response.json()
        assert (body["status"], body["title"], body["instance"]) == (404, "Not Found", path)
