from django.urls import path, re_path
from django.utils.module_loading import import_string

from workspaces import views
from workspaces.backends import WorkspaceBackend, backends

app_name = "workspaces"


def _request_page(backend: WorkspaceBackend) -> object:
    """The request page of a kind registered at start-up (the apps' ready()), under its own
    URL name: new/<its path>/ (new/ for a path of ""), its own view or the generic one."""
    form = backend.form
    view = import_string(form.view) if form.view else views.workspace_request_kind
    route = f"new/{form.path}/" if form.path else "new/"
    return path(route, view, {"kind": backend.kind}, form.name)


urlpatterns = [
    path("", views.workspace_list, name="list"),
    path("new/equivalents/", views.workspace_request_equivalents, name="request-equivalents"),
    *[_request_page(b) for b in backends()],
    # Any registered kind's page, by its kind (one registered after start-up has no other).
    path("new/<str:kind>/", views.workspace_request_kind, name="request-kind"),
    path("<uuid:pk>/", views.workspace_detail, name="detail"),
    path("<uuid:pk>/telemetry/", views.workspace_telemetry, name="telemetry"),
    path("<uuid:pk>/kubeconfig/", views.workspace_kubeconfig, name="kubeconfig"),
    path("<uuid:pk>/resize/", views.workspace_resize, name="resize"),
    re_path(
        r"^(?P<pk>[0-9a-f-]{36})/(?P<action>keep|stop|start|delete|retry|withdraw)/$",
        views.workspace_action,
        name="action",
    ),
]
