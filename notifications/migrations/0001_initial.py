import uuid

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("teams", "0018_notifications_moved_out"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    # The models moved from teams with their tables (db_table): Django's state gains them
    # here (teams.0018 forgot them); the database already has the tables, indexes and
    # constraints, so nothing is run on it.
    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="Webhook",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        (
                            "kind",
                            models.CharField(
                                choices=[
                                    ("teams", "Microsoft Teams"),
                                    ("slack", "Slack"),
                                    ("generic", "JSON (signed)"),
                                ],
                                max_length=16,
                            ),
                        ),
                        ("name", models.CharField(max_length=100)),
                        ("url_encrypted", models.TextField()),
                        ("url_redacted", models.CharField(max_length=120)),
                        ("secret_encrypted", models.TextField(blank=True)),
                        ("events", models.JSONField(default=list)),
                        ("enabled", models.BooleanField(default=True)),
                        ("consecutive_failures", models.PositiveIntegerField(default=0)),
                        ("disabled_at", models.DateTimeField(blank=True, null=True)),
                        ("disabled_reason", models.CharField(blank=True, max_length=300)),
                        ("created_at", models.DateTimeField()),
                        (
                            "created_by",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                        (
                            "team",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="webhooks",
                                to="teams.team",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "teams_webhook",
                        "ordering": ["team", "name", "pk"],
                    },
                ),
                migrations.CreateModel(
                    name="WebhookDelivery",
                    fields=[
                        (
                            "id",
                            models.UUIDField(
                                default=uuid.uuid4,
                                editable=False,
                                primary_key=True,
                                serialize=False,
                            ),
                        ),
                        (
                            "event",
                            models.CharField(
                                choices=[
                                    ("approval_needed", "Approval needed"),
                                    ("approval_decided", "Approval decided"),
                                    ("idle_warning", "Idle stop warning"),
                                    ("idle_stop", "Stopped automatically"),
                                    ("budget", "Budget threshold passed"),
                                    ("eviction", "Spot eviction"),
                                    ("failure", "Workspace failed"),
                                    ("recommendation", "Right-sizing recommendations"),
                                    ("test", "Test message"),
                                ],
                                max_length=32,
                            ),
                        ),
                        ("payload", models.JSONField(default=dict)),
                        ("created_at", models.DateTimeField()),
                        (
                            "state",
                            models.CharField(
                                choices=[
                                    ("pending", "Pending"),
                                    ("delivered", "Delivered"),
                                    ("failed", "Failed"),
                                    ("abandoned", "Abandoned (hook disabled)"),
                                ],
                                default="pending",
                                max_length=16,
                            ),
                        ),
                        ("attempts", models.PositiveSmallIntegerField(default=0)),
                        ("next_attempt_at", models.DateTimeField(blank=True, null=True)),
                        (
                            "webhook",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="deliveries",
                                to="notifications.webhook",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "teams_webhookdelivery",
                    },
                ),
                migrations.CreateModel(
                    name="WebhookAttempt",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        (
                            "event",
                            models.CharField(
                                choices=[
                                    ("approval_needed", "Approval needed"),
                                    ("approval_decided", "Approval decided"),
                                    ("idle_warning", "Idle stop warning"),
                                    ("idle_stop", "Stopped automatically"),
                                    ("budget", "Budget threshold passed"),
                                    ("eviction", "Spot eviction"),
                                    ("failure", "Workspace failed"),
                                    ("recommendation", "Right-sizing recommendations"),
                                    ("test", "Test message"),
                                ],
                                max_length=32,
                            ),
                        ),
                        ("at", models.DateTimeField()),
                        ("attempt", models.PositiveSmallIntegerField()),
                        ("status_code", models.PositiveSmallIntegerField(blank=True, null=True)),
                        (
                            "outcome",
                            models.CharField(
                                choices=[
                                    ("ok", "Delivered"),
                                    ("http_error", "Refused"),
                                    ("gone", "Gone (hook disabled)"),
                                    ("timeout", "Timed out"),
                                    ("error", "Connection error"),
                                ],
                                max_length=16,
                            ),
                        ),
                        ("duration_ms", models.PositiveIntegerField()),
                        ("error", models.CharField(blank=True, max_length=300)),
                        (
                            "webhook",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="attempts",
                                to="notifications.webhook",
                            ),
                        ),
                        (
                            "delivery",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="attempt_log",
                                to="notifications.webhookdelivery",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "teams_webhookattempt",
                        "ordering": ["-at", "-pk"],
                    },
                ),
                migrations.CreateModel(
                    name="Notice",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("text", models.TextField()),
                        ("link", models.CharField(blank=True, max_length=200)),
                        ("created_at", models.DateTimeField()),
                        ("read_at", models.DateTimeField(blank=True, null=True)),
                        (
                            "kind",
                            models.CharField(
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
                        ("about", models.CharField(blank=True, max_length=64)),
                        (
                            "expires_at",
                            models.DateTimeField(
                                blank=True,
                                help_text="No longer true from then on (e.g. a month's budget)",
                                null=True,
                            ),
                        ),
                        ("resolved_at", models.DateTimeField(blank=True, null=True)),
                        ("resolved_reason", models.CharField(blank=True, max_length=300)),
                        (
                            "resolved_by",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="+",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                        (
                            "user",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="notices",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                    ],
                    options={
                        "db_table": "teams_notice",
                        "ordering": ["-created_at", "-id"],
                        "indexes": [
                            models.Index(
                                fields=["user", "read_at"], name="teams_notic_user_id_876696_idx"
                            ),
                            models.Index(
                                condition=models.Q(("resolved_at__isnull", True)),
                                fields=["about", "kind"],
                                name="notice_open_about",
                            ),
                        ],
                    },
                ),
                migrations.AddConstraint(
                    model_name="webhook",
                    constraint=models.UniqueConstraint(
                        fields=("team", "name"), name="webhook_name_unique_in_team"
                    ),
                ),
                migrations.AddIndex(
                    model_name="webhookdelivery",
                    index=models.Index(
                        fields=["state", "next_attempt_at"], name="teams_webho_state_fc7d1e_idx"
                    ),
                ),
                migrations.AddIndex(
                    model_name="webhookattempt",
                    index=models.Index(
                        fields=["webhook", "at"], name="teams_webho_webhook_0e62e6_idx"
                    ),
                ),
            ],
            database_operations=[],
        ),
    ]
