"""Re-encrypt every webhook's URL and signing secret with the first of
WEBHOOK_ENCRYPTION_KEYS (notifications.webhook_crypto), so older keys can then be dropped."""

from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from notifications import webhook_crypto
from notifications.models import Webhook


class Command(BaseCommand):
    help = "Re-encrypt webhook URLs and secrets with the newest WEBHOOK_ENCRYPTION_KEYS key."

    def handle(self, *args: Any, **options: Any) -> None:
        rotated = 0
        with transaction.atomic():
            for hook in Webhook.objects.select_for_update().order_by("pk"):
                try:
                    hook.url_encrypted = webhook_crypto.rotate(hook.url_encrypted)
                    if hook.secret_encrypted:
                        hook.secret_encrypted = webhook_crypto.rotate(hook.secret_encrypted)
                except webhook_crypto.InvalidToken as error:
                    raise CommandError(
                        f"Webhook {hook.pk} opens with none of the keys: keep the old key "
                        "in WEBHOOK_ENCRYPTION_KEYS until rotation is done."
                    ) from error
                hook.save(update_fields=["url_encrypted", "secret_encrypted"])
                rotated += 1
        self.stdout.write(f"Re-encrypted {rotated} webhooks.")
