"""Spend pages: a team's (under its /teams/<slug>/ address) and the platform's. Included by
portal/urls.py beside teams.urls: billing sits above teams, so teams' URLconf names no billing
view."""

from django.urls import path

from billing import savings_views, team_views, views

urlpatterns = [
    path("teams/", team_views.team_list, name="team-list"),
    path("teams/<slug:slug>/spend/", views.team_spend, name="team-spend"),
    path("teams/<slug:slug>/spend/data/", views.team_spend_data, name="team-spend-data"),
    path(
        "teams/<slug:slug>/spend/reconciliation/",
        views.team_spend_reconciliation,
        name="team-spend-reconciliation",
    ),
    path("teams/<slug:slug>/spend.csv", views.team_spend_csv, name="team-spend-csv"),
    path("teams/<slug:slug>/savings/", savings_views.team_savings, name="team-savings"),
    path("savings/", savings_views.platform_savings, name="platform-savings"),
    path("spend/", views.platform_spend, name="platform-spend"),
    path(
        "spend/reconciliation/",
        views.platform_spend_reconciliation,
        name="platform-spend-reconciliation",
    ),
    path("spend.csv", views.platform_spend_csv, name="platform-spend-csv"),
]
