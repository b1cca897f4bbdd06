"""PASSWORD_LOGIN: whether local accounts may sign in with a password (the login page, Django
admin's login, anything that calls authenticate() with a password).

On by default: the embedded demo and a break-glass platform admin use local accounts. A
production deployment that signs everyone in through Entra ID sets PASSWORD_LOGIN=false; an
operator sets it back to true, temporarily, to let a local platform admin in when Entra ID
cannot be used. Off without Entra ID sign-in nobody could sign in, so the portal refuses to
start (ImproperlyConfigured naming the variables). The switch itself is
teams.backends.PasswordLoginSwitch and the login views (teams/entra_views.py)."""

from django.core.exceptions import ImproperlyConfigured


def password_login(*, configured: bool, entra_tenant_id: str, entra_client_id: str) -> bool:
    """PASSWORD_LOGIN as given; raises ImproperlyConfigured when it is off and Entra ID
    sign-in is not configured (ENTRA_TENANT_ID and ENTRA_CLIENT_ID both set)."""
    if not configured and not (entra_tenant_id and entra_client_id):
        raise ImproperlyConfigured(
            "PASSWORD_LOGIN=false turns off local passwords, but Entra ID sign-in is not "
            "configured (ENTRA_TENANT_ID and ENTRA_CLIENT_ID): nobody could sign in. Set both, "
            "or PASSWORD_LOGIN=true."
        )
    return configured
