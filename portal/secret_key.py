"""Where the portal's SECRET_KEY comes from, and which keys it refuses to start with.

SECRET_KEY signs sessions and is the HMAC key of the agents' tokens and JupyterLab's tokens
(workspaces/telemetry.py, clusters/backends/mig.py): whoever knows it can forge them. So no key
that anyone can read is used: a deployment sets SECRET_KEY to 50 or more random characters, and
only the embedded default (SQLite, kombu's filesystem broker, answering on loopback names only)
may leave it unset; it then makes a random key once in ``var/secret_key`` (mode 0600), which
gunicorn, the Celery worker and beat read alike and which survives restarts, so the agents'
tokens stay valid. Everything else raises ImproperlyConfigured naming SECRET_KEY.
"""

import os
import secrets
import stat
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

# The constant the settings carried until the security review of issue 14: it is public.
PUBLISHED_KEYS = frozenset({"insecure-dev-only-key-set-SECRET_KEY-in-production"})
# Django's own measure of a weak key (check --deploy, security.W009).
MIN_LENGTH = 50
MIN_UNIQUE_CHARACTERS = 5
INSECURE_PREFIX = "django-insecure"
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})
KEY_FILE = "secret_key"
HOW_TO_MAKE_ONE = 'python3 -c "import secrets; print(secrets.token_urlsafe(50))"'


def is_embedded(*, database_engine: str, broker_url: str, allowed_hosts: list[str]) -> bool:
    """True for the embedded default: one machine (SQLite, the filesystem broker) that answers
    only to loopback names, so a key in its var/ folder is shared by all of its processes."""
    return (
        database_engine.endswith("sqlite3")
        and broker_url.startswith("filesystem://")
        and bool(allowed_hosts)
        and set(allowed_hosts) <= LOOPBACK_HOSTS
    )


def secret_key(*, configured: str, debug: bool, embedded: bool, var_dir: Path) -> str:
    """The key to use: ``configured`` (the SECRET_KEY variable) when it is safe, else, for the
    embedded default only, the one kept in ``var_dir``. Raises ImproperlyConfigured, naming
    SECRET_KEY, for a published key, a weak key with DEBUG off, or no key outside the
    embedded default."""
    if configured:
        _refuse_unsafe(configured, debug)
        return configured
    if not embedded:
        raise ImproperlyConfigured(
            "SECRET_KEY is not set. Only the embedded default (SQLite, the filesystem broker, "
            "ALLOWED_HOSTS on loopback names) makes its own; set SECRET_KEY to 50 or more random "
            f"characters, e.g. from: {HOW_TO_MAKE_ONE}"
        )
    return _kept_key(var_dir / KEY_FILE)


def _refuse_unsafe(key: str, debug: bool) -> None:
    if key in PUBLISHED_KEYS:
        raise ImproperlyConfigured(
            "SECRET_KEY is the development key published in the portal's source; anyone can "
            f"forge sessions and agent tokens with it. Make a new one: {HOW_TO_MAKE_ONE}"
        )
    weak = (
        len(key) < MIN_LENGTH
        or len(set(key)) < MIN_UNIQUE_CHARACTERS
        or key.startswith(INSECURE_PREFIX)
    )
    if weak and not debug:
        raise ImproperlyConfigured(
            f"SECRET_KEY must be at least {MIN_LENGTH} random characters (not Django's "
            f"'{INSECURE_PREFIX}' placeholder) when DEBUG is off. Make one: {HOW_TO_MAKE_ONE}"
        )


def _kept_key(path: Path) -> str:
    """The key in ``path``, made first if missing. Web, worker and beat start together: each
    writes a candidate to a file of its own and hard-links it into place, so the first one
    wins and nobody reads a half-written file."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        candidate = path.with_name(f".{path.name}.{secrets.token_hex(8)}")
        fd = os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(secrets.token_urlsafe(64) + "\n")
        try:
            os.link(candidate, path)
        except FileExistsError:
            pass
        finally:
            candidate.unlink()
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        raise ImproperlyConfigured(
            f"SECRET_KEY of the embedded default, {path}, is readable by other users "
            f"(mode {mode:o}): chmod 600 it."
        )
    key = path.read_text().strip()
    if len(key) < MIN_LENGTH:
        raise ImproperlyConfigured(
            f"SECRET_KEY of the embedded default, {path}, is shorter than {MIN_LENGTH} "
            "characters: delete the file and a new key is made (agents' tokens change)."
        )
    return key


# The emulator's client secret (cloudsim/entra/directory.py): public, like PUBLISHED_KEYS.
DEMO_ENTRA_SECRETS = frozenset({"demo-client-secret"})


def entra_client_secret(*, configured: str, embedded: bool) -> str:
    """ENTRA_CLIENT_SECRET as given; raises ImproperlyConfigured, naming the variable and never
    its value, when a deployment other than the embedded default sets the emulator's public
    demo secret (anyone could then redeem the portal's codes as the portal)."""
    if configured in DEMO_ENTRA_SECRETS and not embedded:
        raise ImproperlyConfigured(
            "ENTRA_CLIENT_SECRET is the emulator's demo secret, published in the portal's "
            "source. Create a client secret (or certificate) for the app registration in "
            "Entra ID and set ENTRA_CLIENT_SECRET to it."
        )
    return configured
