from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("teams", "0017_quotarequest_resize"),
    ]

    # Notice and the webhook models moved to the notifications app with their tables
    # (notifications.0001_initial): this forgets them in teams' state only; no table or row
    # moves.
    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveField(
                    model_name="webhook",
                    name="created_by",
                ),
                migrations.RemoveField(
                    model_name="webhook",
                    name="team",
                ),
                migrations.RemoveField(
                    model_name="webhookdelivery",
                    name="webhook",
                ),
                migrations.RemoveField(
                    model_name="webhookattempt",
                    name="webhook",
                ),
                migrations.RemoveField(
                    model_name="webhookattempt",
                    name="delivery",
                ),
                migrations.DeleteModel(
                    name="Notice",
                ),
                migrations.DeleteModel(
                    name="Webhook",
                ),
                migrations.DeleteModel(
                    name="WebhookAttempt",
                ),
                migrations.DeleteModel(
                    name="WebhookDelivery",
                ),
            ],
            database_operations=[],
        ),
    ]
