"""Django admin of billing: where the platform admin chooses which sizes and regions are
offered. Here rather than in workspaces/admin.py: a size is offered only where Azure publishes
its price (billing.price_sync.offering_unpriced_reason)."""

from django import forms
from django.contrib import admin, messages

from billing.price_sync import offering_unpriced_reason
from common.admin_access import PlatformAdminAccess
from workspaces.models import SizeOffering


class SizeOfferingForm(forms.ModelForm):
    """Refuses to offer a size that has no Azure price in its region, saying why."""

    class Meta:
        model = SizeOffering
        fields = ["offered", "allow_region_fallback"]

    def clean_offered(self):
        offered = self.cleaned_data["offered"]
        if offered and not self.instance.offered:
            reason = offering_unpriced_reason(
                vm_size=self.instance.vm_size, region=self.instance.region
            )
            if reason:
                raise forms.ValidationError(reason)
        return offered


@admin.register(SizeOffering)
class SizeOfferingAdmin(PlatformAdminAccess, admin.ModelAdmin):
    """Facts come from the catalog (manage.py load_catalog); the admin decides ``offered`` and
    ``allow_region_fallback``."""

    readonly_fields = [
        "vm_size",
        "region",
        "gpu_model",
        "gpu_count",
        "gpu_partition",
        "gpu_memory_gib",
        "vcpus",
        "memory_gib",
        "price_per_hour",
    ]
    list_display = [
        "vm_size",
        "region",
        "gpus",
        "gpu_memory_gib",
        "total_gpu_memory_gib",
        "suits",
        "price_per_hour",
        "offered",
        "allow_region_fallback",
    ]
    list_editable = ["offered", "allow_region_fallback"]
    list_filter = ["offered", "region", "gpu_model"]
    search_fields = ["vm_size", "region"]
    actions = ["offer", "withdraw"]

    @admin.display(description="GPUs", ordering="gpu_count")
    def gpus(self, obj):
        return obj.gpu_label  # "2 × A100", "1/6 A10"

    @admin.display(description="GPU memory in total (GiB)")
    def total_gpu_memory_gib(self, obj):
        return obj.total_gpu_memory_gib

    @admin.display(description="Suits")
    def suits(self, obj):
        return obj.suits.label  # workspaces.suitability

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    form = SizeOfferingForm

    def get_changelist_form(self, request, **kwargs):
        return SizeOfferingForm

    @admin.action(description="Offer the selected sizes")
    def offer(self, request, queryset):
        for offering in queryset:
            reason = offering_unpriced_reason(vm_size=offering.vm_size, region=offering.region)
            if reason:
                self.message_user(request, f"{offering} not offered: {reason}", messages.ERROR)
            else:
                queryset.filter(pk=offering.pk).update(offered=True)

    @admin.action(description="Stop offering the selected sizes")
    def withdraw(self, request, queryset):
        queryset.update(offered=False)
