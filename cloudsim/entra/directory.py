"""The emulated tenant: users, groups, the portal's app registration, codes and keys.

Demo data matches clusters/management/commands/seed_demo.py: alice and bob (researchers),
victor and nora (team admins: app role Team.Admin) in the groups whose object ids the demo's
AKS RoleBindings already name (DEMO_GROUPS there), pat with the app role Platform.Admin, and
a disabled user eve. UPNs are <name>@example.org, as seed_demo's emails.
"""

import secrets
import uuid
from dataclasses import dataclass, field

from .keys import KeyRing

TENANT_ID = "11111111-1111-1111-1111-111111111111"
DOMAIN = "example.org"
DEMO_CLIENT_ID = "22222222-2222-2222-2222-222222222222"
DEMO_CLIENT_SECRET = "demo-client-secret"
DEMO_APP_NAME = "GPU workspace portal"
GROUP_LIMIT = 200  # Groups in a JWT before Entra sends the overage form instead.
VISION_LAB = "0f6d3b2a-8c4e-4f1a-9b7d-2e5c6a7b8c01"
NLP_GROUP = "1a7e4c3b-9d5f-4a2b-8c6e-3f4d5b6c7d02"
# name -> (display name, groups, app roles, enabled)
DEMO_USERS = {
    "alice": ("Alice Researcher", [VISION_LAB], [], True),
    "bob": ("Bob Researcher", [NLP_GROUP], [], True),
    # The portal makes holders of its Team.Admin app role team admin of their groups' teams.
    "victor": ("Victor Admin", [VISION_LAB], ["Team.Admin"], True),
    "nora": ("Nora Admin", [NLP_GROUP], ["Team.Admin"], True),
    "pat": ("Pat Platform", [], ["Platform.Admin"], True),
    "eve": ("Eve Former", [VISION_LAB], [], False),
}


def demo_oid(name: str) -> str:
    """A stable object id per demo name (the same on every start)."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"cloudsim-entra:{name}"))


@dataclass
class User:
    """Graph user fields: id, userPrincipalName, displayName, accountEnabled."""

    id: str
    upn: str
    display_name: str
    enabled: bool = True
    roles: list[str] = field(default_factory=list)  # App roles of the portal's app.

    def graph(self) -> dict:
        return {
            "@odata.type": "#microsoft.graph.user",
            "id": self.id,
            "accountEnabled": self.enabled,
            "userPrincipalName": self.upn,
            "displayName": self.display_name,
            "mail": self.upn,
        }


@dataclass
class Group:
    """Graph group fields: id, displayName, securityEnabled (False: a Microsoft 365 group, which
    AKS RoleBindings and the portal's team link do not take)."""

    id: str
    display_name: str
    members: list[str] = field(default_factory=list)  # User ids, in insertion order.
    security_enabled: bool = True

    def graph(self) -> dict:
        unified = not self.security_enabled
        return {
            "@odata.type": "#microsoft.graph.group",
            "id": self.id,
            "displayName": self.display_name,
            "description": None,
            "groupTypes": ["Unified"] if unified else [],
            "mailEnabled": unified,
            "securityEnabled": self.security_enabled,
        }


@dataclass
class App:
    """An app registration and its service principal in the tenant (a managed identity is a
    service principal too): its client id (appId), the principal's object id (the ``oid`` of
    its app-only tokens) and the app roles assigned to the principal on the portal's app
    (the demo client), which its tokens for the portal's API carry in ``roles``."""

    client_id: str
    object_id: str
    display_name: str
    roles: list[str] = field(default_factory=list)


def sp_oid(client_id: str) -> str:
    """A stable service principal object id per client id (the same on every start)."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"sp:{client_id}"))


@dataclass
class Grant:
    """A code issued by /authorize, redeemable once at /token."""

    user_id: str
    client_id: str
    redirect_uri: str
    scope: str
    nonce: str
    challenge: str
    method: str
    expires: float
    redeemed: bool = False


class Directory:
    def __init__(self):
        self.tenant = TENANT_ID
        self.keys = KeyRing()
        self.users: dict[str, User] = {}
        self.by_upn: dict[str, str] = {}  # Lower-case UPN -> user id.
        self.groups: dict[str, Group] = {}
        self.clients = {DEMO_CLIENT_ID: DEMO_CLIENT_SECRET}  # client_id -> secret.
        self.apps = {DEMO_CLIENT_ID: App(DEMO_CLIENT_ID, sp_oid(DEMO_CLIENT_ID), DEMO_APP_NAME)}
        self.codes: dict[str, Grant] = {}
        self.group_limit = GROUP_LIMIT
        self.add_group(VISION_LAB, "Vision Lab")
        self.add_group(NLP_GROUP, "NLP Group")
        for name, (display, groups, roles, enabled) in DEMO_USERS.items():
            user = self.add_user(name, display, demo_oid(name), enabled, roles)
            for group in groups:
                self.groups[group].members.append(user.id)

    def add_user(self, name, display, oid=None, enabled=True, roles=()) -> User:
        upn = name if "@" in name else f"{name}@{DOMAIN}"
        user = User(oid or str(uuid.uuid4()), upn, display or name, enabled, list(roles))
        self.users[user.id] = user
        self.by_upn[upn.lower()] = user.id
        return user

    def add_app(self, display, client_id=None, secret=None, roles=(), object_id=None) -> App:
        """Register an app (client credentials: ``secret``) whose principal holds ``roles`` on
        the portal's app."""
        client_id = client_id or str(uuid.uuid4())
        app = App(client_id, object_id or sp_oid(client_id), display or client_id, list(roles))
        self.clients[client_id] = secret or secrets.token_urlsafe(30)
        self.apps[client_id] = app
        return app

    def add_group(self, gid: str | None, display: str, security_enabled: bool = True) -> Group:
        group = Group(gid or str(uuid.uuid4()), display, security_enabled=security_enabled)
        self.groups[group.id] = group
        return group

    def user(self, key: str) -> User | None:
        """By object id or UPN (case-insensitive), as Graph's /users/{id | userPrincipalName}."""
        return self.users.get(key) or self.users.get(self.by_upn.get(key.lower(), ""))

    def groups_of(self, user_id: str) -> list[str]:
        return [g.id for g in self.groups.values() if user_id in g.members]
