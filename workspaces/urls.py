from django.urls import path, re_path

from workspaces import views
from workspaces.backends import backends

app_name = "workspaces"

urlpatterns = [
    path("", views.workspace_list, name="list"),
    path("new/", views.workspace_request, name="request"),
    path("new/equivalents/", views.workspace_request_equivalents, name="request-equivalents"),
    # One request page per kind that has its own (the registry is filled by the apps' ready()).
    *[
        path(f"new/{b.form.path}/", views.workspace_request_kind, {"kind": b.kind}, b.form.name)
        for b in backends()
        if b.form is not None
    ],
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
