"""Which settings a production deployment must set, and the error that names those it did not.

Production is a deployment that is not the embedded default (portal/secret_key.is_embedded:
SQLite, the filesystem broker, loopback names) and whose Azure clients hold a real credential
(AZURE_CREDENTIAL "default", i.e. AZURE_ENDPOINT is not the emulator on a loopback address).
Those are the deployments where a default would be wrong rather than merely local: the SQLite
file, the filesystem broker and the file cache live on one machine, loopback names answer no
browser, and the all-zeros subscription is the emulator's. Stacks pointed at the emulator (the
test suite on PostgreSQL, the benchmarks, `make run` with DATABASE_URL) keep their defaults.
SECRET_KEY is checked apart, for every deployment but the embedded default (secret_key.py).
"""

import hashlib
import re
from collections.abc import Mapping

from django.core.exceptions import ImproperlyConfigured

# Variable -> what goes wrong in production without it (said in the error).
REQUIRED_IN_PRODUCTION = {
    "DATABASE_URL": "the database would be a SQLite file on this machine",
    "CELERY_BROKER_URL": "tasks would go to a folder on this machine, unseen by other workers",
    "ALLOWED_HOSTS": "the portal would answer only to 127.0.0.1 and localhost",
    "CACHE_URL": "web, worker and beat processes on other machines would not share the cache",
    "AZURE_SUBSCRIPTION_ID": "workspaces would be created in the emulator's all-zeros subscription",
}


def require_production_settings(
    *, environ: Mapping[str, str], embedded: bool, azure_credential: str
) -> None:
    """Raise ImproperlyConfigured naming every REQUIRED_IN_PRODUCTION variable that ``environ``
    (os.environ, with .env read into it) leaves unset or empty, when the deployment is
    production (see the module's docstring); otherwise return."""
    if embedded or azure_credential == "emulator":
        return
    missing = [name for name in REQUIRED_IN_PRODUCTION if not environ.get(name, "").strip()]
    if missing:
        reasons = "; ".join(f"{name}: {REQUIRED_IN_PRODUCTION[name]}" for name in missing)
        raise ImproperlyConfigured(
            f"{', '.join(missing)} must be set in production (docs/operations.md, 'Configuration "
            f"(production)'). Without them {reasons}."
        )


def metrics_token_sha256(*, token: str, sha256: str) -> str:
    """The SHA-256 (hex) of /metrics' bearer token: of ``token`` (METRICS_TOKEN), else
    ``sha256`` (METRICS_TOKEN_SHA256) as given; "" when neither is set (metrics off). Raises
    ImproperlyConfigured for a token under 16 characters or a digest that is not 64 hex digits;
    the error never repeats the value."""
    token, sha256 = token.strip(), sha256.strip().lower()
    if token:
        if len(token) < 16:
            raise ImproperlyConfigured("METRICS_TOKEN must be at least 16 characters long.")
        return hashlib.sha256(token.encode()).hexdigest()
    if sha256 and not re.fullmatch(r"[0-9a-f]{64}", sha256):
        raise ImproperlyConfigured("METRICS_TOKEN_SHA256 must be 64 hexadecimal digits.")
    return sha256


def webhook_allow_loopback(*, configured: bool, embedded: bool, azure_credential: str) -> bool:
    """WEBHOOK_ALLOW_LOOPBACK as given. Raises ImproperlyConfigured when production (see the
    module's docstring) turns it on: a team admin could then make the worker post to the
    portal's own host (notifications/webhook_addresses.py)."""
    if configured and not embedded and azure_credential != "emulator":
        raise ImproperlyConfigured(
            "WEBHOOK_ALLOW_LOOPBACK is for the embedded demo and the emulator only: in "
            "production webhooks may reach public internet addresses alone. Unset it."
        )
    return configured
