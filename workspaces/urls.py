from django.urls import path, re_path

from workspaces import views

app_name = "workspaces"

urlpatterns = [
    path("", views.workspace_list, name="list"),
    path("new/", views.workspace_request, name="request"),
    path("new/mig/", views.workspace_request_mig, name="request-mig"),
    path("new/namespace/", views.workspace_request_namespace, name="request-namespace"),
    path("<uuid:pk>/", views.workspace_detail, name="detail"),
    path("<uuid:pk>/telemetry/", views.workspace_telemetry, name="telemetry"),
    path("<uuid:pk>/kubeconfig/", views.workspace_kubeconfig, name="kubeconfig"),
    re_path(
        r"^(?P<pk>[0-9a-f-]{36})/(?P<action>keep|stop|start|delete|retry)/$",
        views.workspace_action,
        name="action",
    ),
]
