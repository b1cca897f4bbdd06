"""SSH public keys as Azure takes them for Linux VMs.

Azure takes ``ssh-rsa`` keys of 2048 bits or more and ``ssh-ed25519`` keys; it refuses ECDSA,
DSA and FIDO (``sk-``) keys. A key is parsed with cryptography rather than matched by pattern,
and kept in its normal form, ``<type> <base64>[ <comment>]``, so Azure gets exactly what was
checked. A private key pasted by mistake is refused with its own message, and the form that
shows the error must not echo it back (see ``NOT_ECHOED``).
"""

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa
from django.core.exceptions import ValidationError

# Characters, checked before parsing: an RSA 16384-bit public key is about 2,800.
MAX_CHARS = 8192
MIN_RSA_BITS = 2048
MAX_COMMENT_CHARS = 200
AcceptedKey = rsa.RSAPublicKey | ed25519.Ed25519PublicKey
ACCEPTED: dict[str, type[AcceptedKey]] = {
    "ssh-rsa": rsa.RSAPublicKey,
    "ssh-ed25519": ed25519.Ed25519PublicKey,
}
# Private keys: PEM armour (PKCS#1, PKCS#8, OpenSSH, encrypted or not); the base64 of
# "openssh-key-v1", which opens the body of an OpenSSH private key, e.g. pasted after
# "ssh-ed25519 "; and PuTTY's key file.
PRIVATE_MARKERS = ("PRIVATE KEY-----", "b3BlbnNzaC1rZXktdjE", "PuTTY-User-Key-File-")
# Error codes whose input a form must not show again: a secret, or a blob kilobytes long.
NOT_ECHOED = frozenset({"private_key", "too_long"})

PASTE_ONE = (
    "Paste one OpenSSH public key on one line, e.g. the line in ~/.ssh/id_ed25519.pub "
    "(it starts with ssh-ed25519 or ssh-rsa)."
)


def validate_ssh_public_key(value: str) -> str:
    """The key in its normal form, ``"<type> <base64>[ <comment>]"`` (whitespace collapsed).

    Raises django.core.exceptions.ValidationError with a message for the user and a ``code``:
    "private_key", "too_long" (over MAX_CHARS characters), "format", "type" (not RSA or
    Ed25519), "damaged" (the base64 does not parse as its type), "rsa_bits" (under 2048),
    "comment" (over MAX_COMMENT_CHARS or not printable ASCII).
    """
    text = value.strip()
    if any(marker in text for marker in PRIVATE_MARKERS):
        raise ValidationError(
            "This is a private key; paste the .pub file instead (the one line in "
            "~/.ssh/id_ed25519.pub). The private key was not kept: it never leaves your "
            "computer.",
            code="private_key",
        )
    if len(text) > MAX_CHARS:
        raise ValidationError(
            f"A public key is at most {MAX_CHARS} characters; this is {len(text)}. "
            "Paste only the line in your .pub file.",
            code="too_long",
        )
    parts = text.split(None, 2)
    if "\n" in text or "\r" in text or len(parts) < 2:
        raise ValidationError(PASTE_ONE, code="format")
    key_type, blob = parts[0], parts[1]
    key = _parse(key_type, blob)
    comment = " ".join(parts[2].split()) if len(parts) > 2 else ""
    if len(comment) > MAX_COMMENT_CHARS or not all(" " <= c <= "~" for c in comment):
        raise ValidationError(
            f"The comment after the key must be at most {MAX_COMMENT_CHARS} printable ASCII "
            "characters, e.g. alice@laptop.",
            code="comment",
        )
    line = key.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return f"{line.decode()} {comment}".rstrip()


def _parse(key_type: str, blob: str) -> AcceptedKey:
    if key_type not in ACCEPTED:
        if key_type.startswith(("ecdsa-", "sk-", "ssh-")):
            raise ValidationError(
                f"Azure takes RSA and Ed25519 keys for Linux VMs, not {key_type[:40]}. "
                "Make one with: ssh-keygen -t ed25519",
                code="type",
            )
        raise ValidationError(PASTE_ONE, code="format")
    try:
        key = serialization.load_ssh_public_key(f"{key_type} {blob}".encode())
    except (ValueError, UnsupportedAlgorithm):
        key = None
    if not isinstance(key, AcceptedKey) or not isinstance(key, ACCEPTED[key_type]):
        raise ValidationError(
            f"This is not a valid {key_type} key: its base64 part is damaged or cut short. "
            "Copy the whole line of the .pub file again.",
            code="damaged",
        )
    if isinstance(key, rsa.RSAPublicKey) and key.key_size < MIN_RSA_BITS:
        raise ValidationError(
            f"This RSA key has {key.key_size} bits; Azure needs at least {MIN_RSA_BITS}. "
            "Make a new one with: ssh-keygen -t ed25519",
            code="rsa_bits",
        )
    return key


def ssh_public_key_or_blank(value: str) -> str:
    """``value`` in its normal form if it is a key Azure takes, else ""."""
    try:
        return validate_ssh_public_key(value)
    except ValidationError:
        return ""
