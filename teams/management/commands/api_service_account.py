"""manage.py api_service_account NAME --object-id OID: a portal user for a managed identity
(or service principal) that calls the API with Entra ID access tokens (docs/api-tokens.md)."""

import uuid
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from teams.accounts import ServiceAccountError, service_account_create


class Command(BaseCommand):
    help = (
        "Create a service account for a managed identity: its Entra ID access tokens for the "
        "portal's API act as this user. Add it to teams by username afterwards."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username", help="The portal username, e.g. ci-nightly.")
        parser.add_argument(
            "--object-id",
            required=True,
            help="The identity's object (principal) id: the oid claim of its tokens.",
        )
        parser.add_argument("--display-name", default="", help="Shown in lists; optional.")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            object_id = uuid.UUID(options["object_id"])
        except ValueError:
            raise CommandError("--object-id must be a UUID, e.g. the principalId.") from None
        try:
            user = service_account_create(
                username=options["username"],
                object_id=object_id,
                display_name=options["display_name"] or options["username"],
                now=timezone.now(),
            )
        except ServiceAccountError as err:
            raise CommandError(str(err)) from None
        self.stdout.write(f"Service account {user.username} acts for object id {object_id}.")
