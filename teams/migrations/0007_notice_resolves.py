import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("teams", "0006_entra_profile"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="notice",
            options={"ordering": ["-created_at", "-id"]},
        ),
        migrations.AddField(
            model_name="notice",
            name="about",
            field=models.CharField(blank=True, max_length=64),
        ),
        migrations.AddField(
            model_name="notice",
            name="expires_at",
            field=models.DateTimeField(
                blank=True,
                help_text="No longer true from then on (e.g. a month's budget)",
                null=True,
            ),
        ),
        migrations.AddField(
            model_name="notice",
            name="kind",
            field=models.CharField(
                choices=[
                    ("info", "Information"),
                    ("stop_warning", "Stop warning"),
                    ("no_telemetry", "No telemetry"),
                    ("awaiting_approval", "Waiting for approval"),
                    ("approval_asked", "Approval asked"),
                    ("increase_asked", "Quota increase asked"),
                    ("budget", "Budget alert"),
                    ("auto_stop", "Stopped automatically"),
                    ("member_added", "Added to a team"),
                ],
                default="info",
                max_length=24,
            ),
        ),
        migrations.AddField(
            model_name="notice",
            name="resolved_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="notice",
            name="resolved_by",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="+",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.AddField(
            model_name="notice",
            name="resolved_reason",
            field=models.CharField(blank=True, max_length=300),
        ),
        migrations.AddIndex(
            model_name="notice",
            index=models.Index(
                condition=models.Q(("resolved_at__isnull", True)),
                fields=["about", "kind"],
                name="notice_open_about",
            ),
        ),
    ]
