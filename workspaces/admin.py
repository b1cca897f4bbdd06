"""Django admin of workspaces: read-only workspaces and their events. The sizes offered are
billing/admin.py's (offering one needs its Azure price)."""

from django.contrib import admin

from common.admin_access import PlatformAdminAccess
from workspaces.models import Workspace, WorkspaceEvent


class WorkspaceEventInline(PlatformAdminAccess, admin.TabularInline):
    model = WorkspaceEvent
    extra = 0
    can_delete = False
    readonly_fields = ["at", "actor", "from_status", "to_status", "reason", "detail"]

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Workspace)
class WorkspaceAdmin(PlatformAdminAccess, admin.ModelAdmin):
    """Read-only: statuses change only through workspaces.states."""

    list_display = ["name", "team", "owner", "status", "vm_size", "region", "created_at"]
    list_filter = ["status", "region", "team"]
    inlines = [WorkspaceEventInline]

    def has_change_permission(self, request, obj=None):
        return False

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        # Removing the row would orphan the VM in Azure; users delete through the portal.
        return False
