"""Django admin access for platform admins, who are staff users (no per-model permissions)."""


class PlatformAdminAccess:
    """ModelAdmin and InlineModelAdmin mixin: staff users may view and change; everyone else is
    refused. Django asks a ModelAdmin ``has_add_permission(request)`` and an inline
    ``has_add_permission(request, obj)``, so ``obj`` is optional here."""

    def _is_platform_admin(self, request) -> bool:
        return request.user.is_active and request.user.is_staff

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
