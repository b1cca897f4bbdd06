"""Entra ID (login.microsoftonline.com) and the Microsoft Graph subset the portal calls.

Paths (base = the emulator's URL, standing in for login.microsoftonline.com and
graph.microsoft.com alike):

GET  /{tenant}/v2.0/.well-known/openid-configuration   discovery (oidc.discovery)
GET  /{tenant}/discovery/v2.0/keys                      JWKS, RS256 (keys.KeyRing)
GET  /{tenant}/oauth2/v2.0/authorize                    a page to pick a demo identity
POST /{tenant}/oauth2/v2.0/authorize                    picked: 302 to redirect_uri?code&state
POST /{tenant}/oauth2/v2.0/token                        authorization_code (+PKCE S256),
                                                        client_credentials
POST /v1.0/users/{id}/getMemberObjects                  GET /v1.0/groups/{id}/members
GET  /v1.0/users/{id|upn}                               GET /v1.0/users   (graph.py)

State lives in cloud.entra (directory.Directory), reset with the cloud. Tokens are signed with
PyJWT, never by hand.
"""

from .http import handle, owns

__all__ = ["handle", "owns"]
