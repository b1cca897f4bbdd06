"""Django admin access for platform admins (the teams.use_admin_site rule; no per-model
permissions)."""


class PlatformAdminAccess:
    """ModelAdmin and InlineModelAdmin mixin: platform admins may view and change; everyone else
    is refused. Django asks a ModelAdmin ``has_add_permission(request)`` and an inline
    ``has_add_permission(request, obj)``, so ``obj`` is optional here."""

    def _is_platform_admin(self, request) -> bool:
        return request.user.has_perm("teams.use_admin_site")

    def has_module_permission(self, request):
        return self._is_platform_admin(request)

    def has_view_permission(self, request, obj=None):
        return self._is_platform_admin(request)

    def has_change_permission(self, request, obj=None):
        return self._is_platform_admin(request)

    def has_add_permission(self, request, obj=None):
        return self._is_platform_admin(request)

    def has_delete_permission(self, request, obj=None):
        return self._is_platform_admin(request)
