from django.urls import path

from environments import views

urlpatterns = [
    path("teams/<slug:slug>/environments/", views.team_environments, name="team-environments"),
    path(
        "teams/<slug:slug>/environments/<int:pk>/visibility/",
        views.team_environment_visibility,
        name="team-environment-visibility",
    ),
]
