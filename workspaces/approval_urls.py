"""The approvals pages' URLs (workspaces/approval_views.py), at the site's root."""

from django.urls import path, re_path

from workspaces import approval_views as views

urlpatterns = [
    path("approvals/", views.approval_queue, name="approvals"),
    re_path(
        r"^approvals/(?P<pk>[0-9]+)/(?P<decision>approve|reject)/$",
        views.approval_decide,
        name="approval-decide",
    ),
    path(
        "approvals/<int:pk>/azure-quota/", views.approval_azure_quota, name="approval-azure-quota"
    ),
    re_path(
        r"^approvals/increases/(?P<pk>[0-9]+)/(?P<decision>approve|reject)/$",
        views.increase_decide,
        name="increase-decide",
    ),
]
