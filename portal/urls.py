from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from django.views.generic import RedirectView

from portal import health
from teams.forms import LoginForm
from workspaces import api

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="workspaces:list"), name="home"),
    path("healthz", health.healthz, name="healthz"),
    path(
        "accounts/login/",
        auth_views.LoginView.as_view(authentication_form=LoginForm),
        name="login",
    ),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("workspaces/", include("workspaces.urls")),
    path("clusters/", include("clusters.urls")),
    path("api/workspaces/<uuid:pk>/heartbeat/", api.agent_heartbeat, name="agent-heartbeat"),
    path("", include("live.urls")),
    path("", include("teams.urls")),
    path("admin/", admin.site.urls),
]
