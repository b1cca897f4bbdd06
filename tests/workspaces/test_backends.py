"""The registry of workspace kinds: every built-in kind has one backend that fulfils the
interface, an unknown kind is a clear error, and the VM backend's cloud adapter fulfils its
protocol."""

import inspect

import pytest
from django.template.loader import get_template
from django.utils import timezone

from cloud import azure_vm
from cloud.errors import CloudError
from cloud.protocols import VmCloud
from tests.factories import WorkspaceFactory
from workspaces.backends import (
    UnknownKind,
    WorkspaceBackend,
    backend_for,
    backends,
    request_path,
)
from workspaces.backends.vm import VmBackend
from workspaces.models import Workspace
from workspaces.operations import workspace_advance
from workspaces.states import Status

BUILT_IN = ("vm", "mig", "namespace")  # registered by the workspaces and clusters apps


def test_every_kind_has_its_backend():
    for kind in BUILT_IN:
        assert backend_for(kind).kind == kind
    assert sorted(b.kind for b in backends()) == sorted(BUILT_IN)


def test_an_unregistered_kind_is_a_clear_error():
    with pytest.raises(UnknownKind) as caught:
        backend_for("gpu-cluster")
    message = str(caught.value)
    assert "'gpu-cluster'" in message
    assert "mig, namespace, vm" in message  # what is registered
    assert "AppConfig.ready()" in message  # where to register it


def test_a_workspace_of_an_unregistered_kind_says_so():
    with pytest.raises(UnknownKind):
        _ = Workspace(kind="gpu-cluster").backend


@pytest.mark.parametrize("kind", BUILT_IN)
def test_each_backend_fulfils_the_interface(kind):
    backend = backend_for(kind)
    assert isinstance(backend, WorkspaceBackend)
    for name in (
        "service",
        "where",
        "error_source",
        "stop_label",
        "delete_warning",
        "hand_over_note",
    ):
        assert getattr(backend, name), name
    assert backend.label and backend.spend_colour.startswith("#")
    assert request_path(kind).startswith("/workspaces/new/")
    get_template(backend.facts_template)
    get_template(backend.connect_template)
    get_template(backend.form.template)


def test_azure_vm_fulfils_the_vm_cloud_protocol():
    wanted = {
        name: inspect.signature(member)
        for name, member in inspect.getmembers(VmCloud, inspect.isfunction)
        if not name.startswith("_")
    }
    assert wanted
    for name, signature in wanted.items():
        given = inspect.signature(getattr(azure_vm, name))
        assert list(given.parameters) == list(signature.parameters)[1:], name  # less self
    assert VmBackend().cloud is azure_vm


class _Recorder(VmBackend):
    """A fourth kind for the test: Azure's VM backend in all but its name and its steps."""

    kind = "gpu-cluster"
    service = "Slurm"

    def __init__(self):
        super().__init__()
        self.calls = []

    def advance(self, workspace, clock):
        self.calls.append(("advance", workspace.pk))
        raise CloudError(code="NodeFailure", message="the node went away", status=409)

    def clean_up_failed_create(self, workspace):
        self.calls.append(("clean_up", workspace.pk))


@pytest.mark.django_db
def test_a_new_kind_is_one_backend_and_one_register_line(monkeypatch):
    from workspaces.backends import registry

    backend = _Recorder()
    monkeypatch.setitem(registry._BACKENDS, backend.kind, backend)
    workspace = WorkspaceFactory(kind=backend.kind, status=Status.PROVISIONING)

    workspace_advance(workspace_id=workspace.pk, clock=timezone.now)

    workspace.refresh_from_db()
    assert backend.calls == [("advance", workspace.pk), ("clean_up", workspace.pk)]
    assert workspace.status == Status.FAILED
    assert workspace.events.last().reason == "Slurm refused the create: NodeFailure"
