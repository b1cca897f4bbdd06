"""The tenant's token signing keys: RS256, published as a JWKS, rotatable.

JWKS shape (https://login.microsoftonline.com/{tenant}/discovery/v2.0/keys):
{"keys": [{"kty": "RSA", "use": "sig", "kid", "x5t", "n", "e", "alg": "RS256"}]}.
Entra lists keys it no longer signs with until they are retired; so does the ring: rotate()
signs with a new key and keeps the old one listed until drop().
"""

import base64
import json
import secrets
from functools import cache

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa


def _new_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@cache
def _first_key() -> tuple[str, rsa.RSAPrivateKey]:
    # One per process: a reset must not pay for a 2048-bit key each time.
    return _kid(), _new_key()


def _kid() -> str:
    return base64.urlsafe_b64encode(secrets.token_bytes(20)).decode().rstrip("=")


class KeyRing:
    """keys: kid -> private key, oldest first; `active` signs new tokens."""

    def __init__(self):
        kid, key = _first_key()
        self.keys: dict[str, rsa.RSAPrivateKey] = {kid: key}
        self.active = kid

    def rotate(self, drop_old: bool = False) -> str:
        """Sign with a fresh key from now; the old ones stay listed unless drop_old."""
        kid = _kid()
        if drop_old:
            self.keys.clear()
        self.keys[kid] = _new_key()
        self.active = kid
        return kid

    def drop(self, kid: str) -> bool:
        """Stop listing `kid` (never the active key). False when it is not listed."""
        if kid == self.active or kid not in self.keys:
            return False
        del self.keys[kid]
        return True

    def jwks(self) -> dict:
        return {"keys": [self._jwk(kid, key) for kid, key in self.keys.items()]}

    @staticmethod
    def _jwk(kid: str, key: rsa.RSAPrivateKey) -> dict:
        jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
        jwk.pop("key_ops", None)  # PyJWT's addition; Entra's keys do not carry it.
        # Entra's kid is the certificate's x5t; the emulator has no certificate (no x5c).
        return {**jwk, "kid": kid, "x5t": kid, "use": "sig", "alg": "RS256"}

    def sign(self, claims: dict) -> str:
        headers = {"kid": self.active, "x5t": self.active, "typ": "JWT"}
        return jwt.encode(claims, self.keys[self.active], algorithm="RS256", headers=headers)

    def verify(self, token: str, audience: str) -> dict:
        """Claims of a token this tenant signed for `audience`; jwt.InvalidTokenError if not."""
        kid = jwt.get_unverified_header(token).get("kid")
        key = self.keys.get(kid)
        if key is None:
            raise jwt.InvalidTokenError(f"unknown kid {kid!r}")
        return jwt.decode(token, key.public_key(), algorithms=["RS256"], audience=audience)
