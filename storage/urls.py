from django.urls import path

from storage import views

urlpatterns = [
    path("teams/<slug:slug>/storage/", views.team_storage, name="team-storage"),
    path("teams/<slug:slug>/storage/shares/", views.share_create, name="storage-share-create"),
    path(
        "teams/<slug:slug>/storage/shares/<int:pk>/delete/",
        views.share_delete,
        name="storage-share-delete",
    ),
    path(
        "teams/<slug:slug>/storage/shares/<int:pk>/restore/",
        views.share_restore,
        name="storage-share-restore",
    ),
    path(
        "teams/<slug:slug>/storage/shares/<int:pk>/snapshot/",
        views.share_snapshot,
        name="storage-share-snapshot",
    ),
    path("teams/<slug:slug>/storage/quota/", views.storage_quota, name="storage-quota"),
    path(
        "teams/<slug:slug>/storage/disk-snapshots/<int:pk>/delete/",
        views.disk_snapshot_delete,
        name="storage-disk-snapshot-delete",
    ),
    path(
        "teams/<slug:slug>/storage/disk-snapshots/<int:pk>/restore/",
        views.disk_snapshot_restore,
        name="storage-disk-snapshot-restore",
    ),
]
