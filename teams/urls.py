from django.urls import path

from teams import token_views, views, webhook_views

urlpatterns = [
    path("account/", views.account, name="account"),
    path("account/tokens/", token_views.account_tokens, name="account-tokens"),
    path(
        "account/tokens/<int:pk>/revoke/",
        token_views.account_token_revoke,
        name="account-token-revoke",
    ),
    path("teams/<slug:slug>/", views.team_detail, name="team-detail"),
    path("teams/<slug:slug>/members/invite/", views.team_invite, name="team-invite"),
    path(
        "teams/<slug:slug>/members/<int:pk>/merge/",
        views.team_member_merge,
        name="team-member-merge",
    ),
    path("teams/<slug:slug>/group/", views.team_group, name="team-group"),
    path(
        "teams/<slug:slug>/members/<int:pk>/role/", views.team_member_role, name="team-member-role"
    ),
    path(
        "teams/<slug:slug>/members/<int:pk>/remove/",
        views.team_member_remove,
        name="team-member-remove",
    ),
    path("teams/<slug:slug>/increase/", views.team_increase, name="team-increase"),
    path("teams/<slug:slug>/quota/", views.team_quota, name="team-quota"),
    path("teams/<slug:slug>/idle-policy/", views.team_idle_policy, name="team-idle-policy"),
    path("teams/<slug:slug>/leaver-policy/", views.team_leaver_policy, name="team-leaver-policy"),
    path("teams/<slug:slug>/webhooks/", webhook_views.team_webhooks, name="team-webhooks"),
    path(
        "teams/<slug:slug>/webhooks/<int:pk>/",
        webhook_views.team_webhook_change,
        name="team-webhook-change",
    ),
    path(
        "teams/<slug:slug>/webhooks/<int:pk>/test/",
        webhook_views.team_webhook_test,
        name="team-webhook-test",
    ),
    path(
        "teams/<slug:slug>/webhooks/<int:pk>/delete/",
        webhook_views.team_webhook_delete,
        name="team-webhook-delete",
    ),
    path(
        "teams/<slug:slug>/webhooks/<int:pk>/log/",
        webhook_views.team_webhook_log,
        name="team-webhook-log",
    ),
    path("audit/", views.audit_log, name="audit"),
]
