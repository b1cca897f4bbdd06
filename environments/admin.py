"""Django admin for platform admins: the catalog and what teams hid. Saves go through the same
checks as environments.services (environment_clean), and are audited."""

from typing import TYPE_CHECKING, Any

from django import forms
from django.conf import settings
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.http import HttpRequest
from django.utils import timezone

from common.admin_access import PlatformAdminAccess
from environments.models import Environment, HiddenEnvironment
from environments.services import FIELDS
from environments.validation import EnvironmentInvalid, environment_clean
from teams.audit import audit_record

# Django's classes are generic to the type checker only (no django_stubs_ext monkeypatch here).
if TYPE_CHECKING:
    _Form = forms.ModelForm[Environment]
    _EnvironmentAdmin = admin.ModelAdmin[Environment]
    _HiddenAdmin = admin.ModelAdmin[HiddenEnvironment]
else:
    _Form, _EnvironmentAdmin, _HiddenAdmin = forms.ModelForm, admin.ModelAdmin, admin.ModelAdmin


class EnvironmentForm(_Form):
    class Meta:
        model = Environment
        fields = ("team", "rank", *FIELDS)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        try:
            clean = environment_clean(data, pinned=settings.ENVIRONMENT_IMAGES_PINNED)
        except EnvironmentInvalid as err:
            raise ValidationError(
                {k: v for k, v in err.errors.items() if k in self.fields}
                or "; ".join(err.errors.values())
            ) from None
        data.update(clean)
        return data


@admin.register(Environment)
class EnvironmentAdmin(PlatformAdminAccess, _EnvironmentAdmin):
    form = EnvironmentForm
    list_display = ("name", "slug", "team", "kinds", "driver_method", "gpu_families", "rank")
    list_filter = ("driver_method", "team")
    search_fields = ("name", "slug", "vm_image", "container_image")
    readonly_fields = ("created_by", "created_at", "updated_at")

    def save_model(self, request: HttpRequest, obj: Environment, form: Any, change: bool) -> None:
        now = timezone.now()
        before = {} if not change else {k: form.initial.get(k) for k in FIELDS}
        if not change:
            obj.created_by, obj.created_at = request.user, now  # type: ignore[assignment]
        obj.updated_at = now
        super().save_model(request, obj, form, change)
        audit_record(
            actor=request.user,  # type: ignore[arg-type]
            team=obj.team,
            action="environment.update" if change else "environment.create",
            obj=obj,
            before=before,
            after={k: getattr(obj, k) for k in FIELDS},
            now=now,
        )


@admin.register(HiddenEnvironment)
class HiddenEnvironmentAdmin(PlatformAdminAccess, _HiddenAdmin):
    list_display = ("team", "environment", "hidden_by", "hidden_at")
    list_filter = ("team",)
