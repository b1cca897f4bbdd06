"""Encryption at rest of webhook URLs and signing secrets (notifications.models.Webhook).

An incoming-webhook URL of Microsoft Teams or Slack is itself the credential that lets anyone
post to the channel, so it is stored like the generic hook's signing secret: encrypted with
Fernet (AES-128-CBC with HMAC-SHA256, from the ``cryptography`` package) under MultiFernet.

Keys: ``WEBHOOK_ENCRYPTION_KEYS`` (a list of Fernet keys, newest first; the first encrypts,
all decrypt), then one key derived from ``SECRET_KEY`` with HKDF-SHA256 (it encrypts when no
key is configured). Rotation: put a new key first, keep the old ones after it, run
``manage.py webhook_rotate_keys`` (re-encrypts every row with the first key), then drop the
old keys. See docs/notifications.md.
"""

import base64

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings

__all__ = ["InvalidToken", "decrypt", "encrypt", "rotate"]

_INFO = b"gpu-portal webhook secrets v1"


def _derived_key(secret: str) -> bytes:
    """A Fernet key (urlsafe base64 of 32 bytes) derived from ``secret`` with HKDF-SHA256."""
    hkdf = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_INFO)
    return base64.urlsafe_b64encode(hkdf.derive(secret.encode()))


def _fernet() -> MultiFernet:
    """The configured keys, newest first, then the key derived from SECRET_KEY: it encrypts
    only when no key is configured, and still decrypts what it encrypted, so moving to
    configured keys is one rotation."""
    keys: list[str] = list(getattr(settings, "WEBHOOK_ENCRYPTION_KEYS", []) or [])
    derived = Fernet(_derived_key(settings.SECRET_KEY))
    return MultiFernet([*(Fernet(k.encode()) for k in keys), derived])


def encrypt(plain: str) -> str:
    """``plain`` encrypted with the first key: a Fernet token (ASCII text, ~1.4x longer)."""
    return _fernet().encrypt(plain.encode()).decode()


def decrypt(token: str) -> str:
    """The text ``token`` (from encrypt) holds. Raises InvalidToken when no configured key
    opens it (a key was dropped before rotation) or it was altered."""
    return _fernet().decrypt(token.encode()).decode()


def rotate(token: str) -> str:
    """``token`` re-encrypted under the first key (MultiFernet.rotate). Raises InvalidToken."""
    return _fernet().rotate(token.encode()).decode()
