from django.contrib import admin

from portal.admin_access import PlatformAdminAccess
from teams.models import IdleBounds, Membership, Team


class MembershipInline(PlatformAdminAccess, admin.TabularInline):
    model = Membership
    extra = 1


@admin.register(Team)
class TeamAdmin(PlatformAdminAccess, admin.ModelAdmin):
    list_display = ["name", "slug", "created_at"]
    prepopulated_fields = {"slug": ["name"]}
    inlines = [MembershipInline]


@admin.register(IdleBounds)
class IdleBoundsAdmin(PlatformAdminAccess, admin.ModelAdmin):
    """The one row of limits within which team admins set their idle policy."""

    list_display = [
        "__str__",
        "min_idle_minutes",
        "max_idle_minutes",
        "max_extensions_per_day",
        "max_extension_hours",
        "max_lifetime_hours",
    ]

    def has_add_permission(self, request):
        return super().has_add_permission(request) and not IdleBounds.objects.exists()

    def has_delete_permission(self, request, obj=None):
        return False
