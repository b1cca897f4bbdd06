"""The rules behind the app proxy, without a process: a ticket is for one use, one user, one
app and 60 seconds; a session follows the rules at each request; host labels are parsed
strictly; shares are validated. Time is passed in (``now``)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from apps_proxy import services
from apps_proxy.hosts import AppHost, host_parse, label_parse
from apps_proxy.models import AppSession
from tests.factories import WorkspaceFactory
from workspaces.backends import IdeTarget
from workspaces.requests import WorkspaceActionError
from workspaces.states import Status

pytestmark = pytest.mark.django_db


@pytest.fixture
def lab(cast, monkeypatch):
    """A running workspace of alice's whose backend says JupyterLab listens at 10.0.0.9."""
    ws = WorkspaceFactory(team=cast.team, owner=cast.researcher, status=Status.RUNNING)
    target = IdeTarget("10.0.0.9", 8888, "t" * 48)
    monkeypatch.setattr(services, "app_target", lambda *, workspace, port, app="": target)
    return ws


def test_a_ticket_is_redeemed_once_within_a_minute_for_its_own_app(cast, lab):
    now = timezone.now()
    app = AppHost(lab.pk)
    ticket = services.app_ticket_issue(user=cast.researcher, workspace=lab, port=None, now=now)
    assert services.app_ticket_redeem(ticket=ticket, app=AppHost(lab.pk, 6006), now=now) is None
    late = now + timedelta(seconds=services.TICKET_SECONDS + 1)
    assert services.app_ticket_redeem(ticket=ticket, app=app, now=late) is None
    session = services.app_ticket_redeem(ticket=ticket, app=app, now=now)
    assert session and services.app_ticket_redeem(ticket=ticket, app=app, now=now) is None
    # Nothing secret is stored.
    row = AppSession.objects.get()
    assert ticket not in (row.ticket_hash, row.session_hash) and session != row.session_hash

    route = services.app_session_route(session=session, app=app, now=now)
    assert route == services.Route("10.0.0.9", 8888, "t" * 48, cast.researcher.pk)
    ended = now + timedelta(seconds=services.SESSION_SECONDS + 1)
    assert services.app_session_route(session=session, app=app, now=ended) is None
    assert services.app_session_route(session="guess", app=app, now=now) is None


def test_nobody_but_the_owner_gets_a_ticket_and_a_leaver_loses_the_session(cast, lab):
    now = timezone.now()
    for user in (cast.teammate, cast.team_admin, cast.platform_admin, cast.outsider):
        with pytest.raises(WorkspaceActionError):
            services.app_ticket_issue(user=user, workspace=lab, port=None, now=now)
    ticket = services.app_ticket_issue(user=cast.researcher, workspace=lab, port=None, now=now)
    session = services.app_ticket_redeem(ticket=ticket, app=AppHost(lab.pk), now=now)
    cast.researcher.is_active = False
    cast.researcher.save()
    assert services.app_session_route(session=session, app=AppHost(lab.pk), now=now) is None


def test_shares_take_ports_and_levels_they_know(cast, lab):
    now = timezone.now()
    for port, level in ((22, "team"), (8888 * 10, "team"), (6006, "world")):
        with pytest.raises(WorkspaceActionError):
            services.port_share_create(
                user=cast.researcher, workspace=lab, port=port, level=level, now=now
            )


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("0123456789abcdef0123456789abcdef.apps.localhost:8200", (None,)),
        ("0123456789ABCDEF0123456789ABCDEF.apps.localhost", (None,)),
        ("0123456789abcdef0123456789abcdef-6006.apps.localhost:8200", (6006,)),
        ("0123456789abcdef0123456789abcdef-vscode.apps.localhost:8200", ("vscode",)),
        ("0123456789abcdef0123456789abcdef-vscode-8080.apps.localhost", None),
        ("0123456789abcdef0123456789abcdef-99999.apps.localhost", None),
        ("0123456789abcdef0123456789abcdef-0.apps.localhost", None),
        ("x.0123456789abcdef0123456789abcdef.apps.localhost", None),
        ("0123456789abcdef0123456789abcdef.apps.localhost.evil.example", None),
        ("127.0.0.1:8000", None),
        ("", None),
    ],
)
def test_only_app_hosts_of_the_apps_domain_parse(host, expected):
    parsed = host_parse(host)
    assert (parsed if parsed is None else (parsed.port or parsed.app or None,)) == expected
    assert label_parse("not-a-label") is None


def test_a_workspace_cannot_set_cookies_for_other_apps_hosts_or_the_proxys_own(settings):
    from apps_proxy import asgi  # noqa: PLC0415 (it sets Django up: after pytest-django has)

    tossed = "_xsrf=abc; Domain=apps.localhost; Path=/; SameSite=Lax"
    assert asgi.upstream_set_cookie(tossed) == "_xsrf=abc; Path=/; SameSite=Lax"
    assert asgi.upstream_set_cookie("gpuportal_app=planted; Path=/") is None
    assert asgi.upstream_set_cookie("__Host-gpuportal_app=planted; Path=/; Secure") is None
    settings.APPS_URL_SCHEME = "https"
    assert asgi.cookie_name() == "__Host-gpuportal_app"


def test_a_vs_code_ticket_opens_vs_code_alone_with_code_servers_cookie(cast, monkeypatch):
    """VS Code is an app of its own: a JupyterLab ticket does not redeem on its host nor the
    reverse, and its route carries code-server's session cookie instead of a token."""
    ws = WorkspaceFactory(team=cast.team, owner=cast.researcher, status=Status.RUNNING)
    vscode = IdeTarget("10.0.0.9", 8080, "", "code-server-session=" + "c" * 64)
    lab = IdeTarget("10.0.0.9", 8888, "t" * 48, vscode=vscode)
    monkeypatch.setattr(services.backend_for(ws.kind), "ide_target", lambda workspace: lab)
    now, host = timezone.now(), AppHost(ws.pk, app="vscode")
    jupyter = services.app_ticket_issue(user=cast.researcher, workspace=ws, port=None, now=now)
    assert services.app_ticket_redeem(ticket=jupyter, app=host, now=now) is None
    ticket = services.app_ticket_issue(
        user=cast.researcher, workspace=ws, port=None, now=now, app="vscode"
    )
    assert services.app_ticket_redeem(ticket=ticket, app=AppHost(ws.pk), now=now) is None
    session = services.app_ticket_redeem(ticket=ticket, app=host, now=now)
    route = services.app_session_route(session=session, app=host, now=now)
    assert route == services.Route(
        "10.0.0.9", 8080, None, cast.researcher.pk, "code-server-session=" + "c" * 64
    )
    assert services.app_session_route(session=session, app=AppHost(ws.pk), now=now) is None
    with pytest.raises(WorkspaceActionError):  # a teammate: no more than its JupyterLab
        services.app_ticket_issue(
            user=cast.teammate, workspace=ws, port=None, now=now, app="vscode"
        )


def test_the_proxy_adds_code_servers_cookie_first_and_drops_the_browsers(settings):
    from apps_proxy import asgi  # noqa: PLC0415 (it sets Django up: after pytest-django has)

    route = services.Route("10.0.0.9", 8080, None, 1, "code-server-session=real")
    sent = "gpuportal_app=ours; code-server-session=planted; theme=dark"
    assert asgi._without_our_cookie(sent, route) == "code-server-session=real; theme=dark"
