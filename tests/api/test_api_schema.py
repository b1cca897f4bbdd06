"""The API against its own OpenAPI document (issue 28, finding 15): schemathesis generates
requests for every operation from /api/v1/openapi.json and sends them to the portal's WSGI
application in this process, as a platform admin with a write token. No answer may be a 5xx,
and every answer must be one the document lists for the operation, of its content type and
schema (problem details included).

Bounded for the suite's budget: EXAMPLES per operation, generated (no shrinking), in the
PostgreSQL pass only (the answers do not depend on the database).
"""

import os

import pytest
import schemathesis
from django.core import signals
from django.db import close_old_connections
from django.utils import timezone
from hypothesis import HealthCheck, Phase, settings
from jsonschema_rs import Draft202012Validator  # schemathesis's own validator
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from teams.tokens import api_token_create

EXAMPLES = 25
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


def _schema():
    """/api/v1/openapi.json's document (api.get_openapi_schema serves it), sent to the WSGI app."""
    from api.main import api
    from portal.wsgi import application

    loaded = schemathesis.openapi.from_dict(api.get_openapi_schema())
    loaded.app = application
    return loaded


schema = _schema()


@pytest.fixture(autouse=True)
def _in_process(settings):
    settings.API_RATE_PER_MINUTE = 1_000_000  # the rate limit's 429 has its own test
    # As Django's test client does: the test's transaction holds the connection.
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


@pytest.fixture
def token(db, cast):
    return api_token_create(
        user=cast.platform_admin, name="fuzz", scope="write", expires_in_days=1, now=timezone.now()
    )[1]


@pytest.mark.skipif(not os.environ.get("DATABASE_URL"), reason="runs once: the PostgreSQL pass")
@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)
def test_every_operation_answers_as_documented(case, token):
    case.call_and_validate(headers={"Authorization": f"Bearer {token}"}, checks=CHECKS)


# --- what the document says is accepted ------------------------------------------------------


def _validator(name):
    document = schema.raw_schema
    return Draft202012Validator(
        {"$ref": f"#/components/schemas/{name}", "components": document["components"]}
    )


@pytest.mark.parametrize(
    ("name", "body"),
    [
        ("EstimateIn", {}),  # the form needs parameters or a preset, a precision, a workload
        ("EstimateIn", {"parameters_b": 7, "precision": "bf16", "workload": "x"}),
        (
            "EstimateIn",
            {"preset": "llama-3-8b", "precision": "bf16", "workload": "inference", "layers": 32},
        ),  # fmt: skip
        ("WorkspaceRequestIn", {"kind": "vm", "team": "vision", "name": "minimal"}),
        ("WorkspaceRequestIn", {"kind": "mig", "team": "vision", "name": "minimal"}),
        ("WorkspaceRequestIn", {"kind": "namespace", "team": "vision", "name": "n", "gpus": 1}),
        (
            "WorkspaceRequestIn",
            {
                "kind": "vm",
                "team": "vision",
                "name": "Bad Name",
                "vm_size": "Standard_NC24ads_A100_v4",
                "region": "eastus",
            },
        ),  # fmt: skip
    ],
)
def test_bodies_the_api_refuses_are_not_schema_valid(name, body):
    assert list(_validator(name).iter_errors(body))


def test_bodies_the_api_takes_are_schema_valid():
    vm = {"kind": "vm", "team": "vision", "name": "ok", "vm_size": "S", "region": "eastus"}
    estimate = {"parameters_b": 7, "precision": "bf16", "workload": "inference"}
    assert not list(_validator("WorkspaceRequestIn").iter_errors(vm))
    assert not list(_validator("EstimateIn").iter_errors(estimate))


def test_query_parameters_say_what_is_refused():
    paths = schema.raw_schema["paths"]
    team = paths["/api/v1/recommendations"]["get"]["parameters"][0]
    assert team["name"] == "team" and team["required"] is True
    region = next(
        p for p in paths["/api/v1/offerings"]["get"]["parameters"] if p["name"] == "region"
    )
    check = Draft202012Validator(region["schema"])
    assert not list(check.iter_errors("eastus")) and list(check.iter_errors("east\x01us"))


def test_every_operation_documents_its_problem_answers():
    for path, operations in schema.raw_schema["paths"].items():
        for method, operation in operations.items():
            problems = {
                code: answer for code, answer in operation["responses"].items() if int(code) >= 400
            }
            assert {"401", "429"} <= {str(c) for c in problems}, (method, path)
            for answer in problems.values():
                assert "application/problem+json" in answer["content"], (method, path)
