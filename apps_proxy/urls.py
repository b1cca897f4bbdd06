from django.urls import path

from apps_proxy import views

app_name = "apps_proxy"
urlpatterns = [
    path("apps/enter/", views.app_enter, name="enter"),
    path("workspaces/<uuid:pk>/apps/admin-access/", views.admin_access, name="admin_access"),
    path("workspaces/<uuid:pk>/apps/ports/", views.port_share, name="port_share"),
    path("workspaces/<uuid:pk>/apps/ports/<int:port>/stop/", views.port_stop, name="port_stop"),
]
