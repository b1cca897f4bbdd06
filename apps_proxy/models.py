"""What the app proxy authorises by: sessions on an apps host, admins' access grants, shared
ports. No secret is stored: a ticket and a session cookie are kept as their SHA-256."""

from django.contrib.auth.models import User
from django.db import models

from workspaces.models import Workspace


class AppSession(models.Model):
    """One user's way into one apps host (a workspace's JupyterLab, or one of its shared
    ports). Issued by the portal as a one-use ticket (TICKET_SECONDS), redeemed by the proxy on
    that host for a session cookie (SESSION_SECONDS) that only this host is sent."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="+")
    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="+")
    port = models.PositiveIntegerField(null=True, blank=True)  # None: its IDE (``app``).
    # With port None: "" its JupyterLab, "vscode" its VS Code (apps_proxy.hosts.AppHost.app).
    app = models.CharField(max_length=16, blank=True, default="")
    ticket_hash = models.CharField(max_length=64, unique=True)
    ticket_expires_at = models.DateTimeField()
    session_hash = models.CharField(max_length=64, unique=True, null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()
    redeemed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["expires_at"])]

    def __str__(self) -> str:
        return f"{self.user_id} in {self.workspace_id} port {self.port or self.app or 'JupyterLab'}"


class AdminAccess(models.Model):
    """The owner lets platform admins into the workspace's apps (e.g. for support), until
    revoked. Audited both ways."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="+")
    granted_by = models.ForeignKey(User, on_delete=models.PROTECT, related_name="+")
    granted_at = models.DateTimeField()
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["workspace"],
                condition=models.Q(revoked_at__isnull=True),
                name="one_open_admin_access_per_workspace",
            )
        ]

    def __str__(self) -> str:
        return f"admins in {self.workspace_id} from {self.granted_at}"


class ShareLevel(models.TextChoices):
    PRIVATE = "private", "Only me"
    TEAM = "team", "My team"
    AUTHENTICATED = "authenticated", "Every signed-in user"


class PortShare(models.Model):
    """A port of the workspace served on its own stable apps host, to a level of users."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="+")
    port = models.PositiveIntegerField()
    level = models.CharField(max_length=16, choices=ShareLevel.choices)
    created_by = models.ForeignKey(User, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField()
    stopped_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["workspace", "port"],
                condition=models.Q(stopped_at__isnull=True),
                name="one_open_share_per_port",
            )
        ]

    def __str__(self) -> str:
        return f"port {self.port} of {self.workspace_id} to {self.level}"


class AppStamp(models.Model):
    """A counter the owner's controls bump (a revoked admins' grant, a share stopped or
    changed): with the workspace's status and owner it is the stamp the app proxy checks at
    each request before it trusts an answer it keeps (apps_proxy.services.app_stamp), so such a
    change ends access at the next request. No row: never bumped (generation 0)."""

    workspace = models.OneToOneField(
        Workspace, on_delete=models.CASCADE, primary_key=True, related_name="app_stamp"
    )
    generation = models.PositiveBigIntegerField(default=0)

    def __str__(self) -> str:
        return f"apps of {self.workspace_id} at {self.generation}"
