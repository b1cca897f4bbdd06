"""The labels stored of the moved models follow them: their content types (permissions, the
admin's log) and the team audit log's object type ("teams.Webhook" becomes
"notifications.Webhook", so old entries still name and link their hook)."""

from django.db import migrations

MODELS = ["notice", "webhook", "webhookdelivery", "webhookattempt"]


def _relabel(apps, old: str, new: str) -> None:
    ContentType = apps.get_model("contenttypes", "ContentType")
    taken = set(
        ContentType.objects.filter(app_label=new, model__in=MODELS).values_list("model", flat=True)
    )
    ContentType.objects.filter(app_label=old, model__in=set(MODELS) - taken).update(app_label=new)
    AuditEntry = apps.get_model("teams", "AuditEntry")
    AuditEntry.objects.filter(object_type=f"{old}.Webhook").update(object_type=f"{new}.Webhook")


def forward(apps, schema_editor) -> None:
    _relabel(apps, "teams", "notifications")


def backward(apps, schema_editor) -> None:
    _relabel(apps, "notifications", "teams")


class Migration(migrations.Migration):
    dependencies = [
        ("notifications", "0001_initial"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("teams", "0018_notifications_moved_out"),
    ]

    operations = [migrations.RunPython(forward, backward)]
