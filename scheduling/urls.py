"""The queue's URLs (scheduling/views.py), under /queue/."""

from django.urls import path, re_path

from scheduling import views

app_name = "scheduling"

urlpatterns = [
    path("", views.queue_page, name="queue"),
    path("workspaces/<uuid:pk>/", views.queue_panel, name="panel"),
    re_path(
        r"^workspaces/(?P<pk>[0-9a-f-]{36})/(?P<queue_action>claim|join)/$",
        views.queue_action,
        name="action",
    ),
    re_path(
        r"^workspaces/(?P<pk>[0-9a-f-]{36})/move/(?P<where>front|back|fair)/$",
        views.queue_move,
        name="move",
    ),
    path("workspaces/<uuid:pk>/autostart/", views.autostart, name="autostart"),
    path("teams/<slug:slug>/", views.team_queue, name="team"),
    path("free-now/", views.free_now, name="free-now"),
]
