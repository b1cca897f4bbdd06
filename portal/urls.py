from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.templatetags.static import static
from django.urls import include, path, re_path
from django.views.generic import RedirectView

from api.main import api as api_v1
from api.main import unknown_route as api_unknown_route
from portal import health, metrics
from teams import entra_views
from workspaces import api
from workspaces.sizing import views as sizing_views

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="workspaces:list"), name="home"),
    path("healthz", health.healthz, name="healthz"),
    # Browsers ask for /favicon.ico whatever the page links; the icon is a static file.
    path(
        "favicon.ico",
        RedirectView.as_view(url=static("favicon.svg"), permanent=True),
        name="favicon",
    ),
    path("metrics", metrics.metrics, name="metrics"),
    path("accounts/login/", entra_views.LoginView.as_view(), name="login"),
    path("accounts/entra/login/", entra_views.entra_login, name="entra-login"),
    path("accounts/entra/callback/", entra_views.entra_callback, name="entra-callback"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("workspaces/", include("workspaces.urls")),
    path("clusters/", include("clusters.urls")),
    path("queue/", include("scheduling.urls")),
    path("sizing/estimate", sizing_views.sizing_estimate, name="sizing-estimate"),
    path("api/v1/", api_v1.urls),
    # After the API's routes: any other path under /api/v1/ is a 404 problem, not HTML.
    re_path(r"^api/v1/", api_unknown_route, name="api-unknown-route"),
    path("api/workspaces/<uuid:pk>/heartbeat/", api.agent_heartbeat, name="agent-heartbeat"),
    path("", include("apps_proxy.urls")),
    path("", include("live.urls")),
    path("", include("teams.urls")),
    path("", include("storage.urls")),
    path("", include("environments.urls")),
    path("", include("bookings.urls")),
    path("", include("notifications.urls")),
    path("", include("workspaces.approval_urls")),
    # Before the admin's own: its login honours PASSWORD_LOGIN (teams/entra_views.py).
    path("admin/login/", entra_views.admin_login),
    path("", include("billing.urls")),
    path("admin/", admin.site.urls),
]
