from django.contrib import admin

from portal.admin_access import PlatformAdminAccess
from teams.models import Membership, Team


class MembershipInline(PlatformAdminAccess, admin.TabularInline):
    model = Membership
    extra = 1


@admin.register(Team)
class TeamAdmin(PlatformAdminAccess, admin.ModelAdmin):
    list_display = ["name", "slug", "created_at"]
    prepopulated_fields = {"slug": ["name"]}
    inlines = [MembershipInline]
