from axes.models import AccessAttempt
from django.contrib import admin, messages
from django.utils import timezone

from common.admin_access import PlatformAdminAccess
from teams import accounts
from teams.models import IdleBounds, Membership, Team


class MembershipInline(PlatformAdminAccess, admin.TabularInline):
    model = Membership
    extra = 1


@admin.register(Team)
class TeamAdmin(PlatformAdminAccess, admin.ModelAdmin):
    list_display = ["name", "slug", "created_at"]
    prepopulated_fields = {"slug": ["name"]}
    # The group's name is what Graph said when the group was linked on the team's page.
    readonly_fields = ["entra_group_name"]
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


@admin.register(AccessAttempt)
class LoginLockoutAdmin(PlatformAdminAccess, admin.ModelAdmin):
    """Failed logins counted by django-axes, one row per account, address and browser. A
    platform admin ends a lockout with the actions, which are audited; rows are never added,
    edited or deleted by hand."""

    list_display = ["username", "ip_address", "failures_since_start", "attempt_time"]
    search_fields = ["username", "ip_address"]
    date_hierarchy = "attempt_time"
    fields = ["username", "ip_address", "user_agent", "failures_since_start", "attempt_time"]
    readonly_fields = fields
    actions = ["unlock_accounts", "unlock_addresses"]

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def _unlock(self, request, key: str, values) -> None:
        now = timezone.now()
        for value in sorted(set(values)):
            accounts.login_lockout_reset(actor=request.user, now=now, **{key: value})
            self.message_user(request, f"Unlocked {value}.", messages.SUCCESS)

    @admin.action(description="Unlock the accounts of the selected rows (from every address)")
    def unlock_accounts(self, request, queryset):
        self._unlock(request, "username", queryset.values_list("username", flat=True))

    @admin.action(description="Unlock the addresses of the selected rows (for every account)")
    def unlock_addresses(self, request, queryset):
        self._unlock(request, "ip_address", queryset.values_list("ip_address", flat=True))
