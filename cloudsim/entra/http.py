"""Dispatch of Entra ID and Graph paths (see the package docstring for the list)."""

from ..protocol import Request, Response
from . import graph, oidc
from .replies import EntraError

ENTRA_TAILS = {
    ("v2.0", ".well-known", "openid-configuration"): {"GET": oidc.discovery},
    ("discovery", "v2.0", "keys"): {"GET": oidc.jwks},
    ("oauth2", "v2.0", "authorize"): {"GET": oidc.authorize_page, "POST": oidc.authorize},
    ("oauth2", "v2.0", "token"): {"POST": oidc.token},
}


def owns(path: str) -> bool:
    """True for a Graph path (/v1.0/...) or a tenant-prefixed Entra ID path."""
    segs = [s for s in path.split("/") if s]
    if segs[:1] == ["v1.0"]:
        return True
    return len(segs) >= 4 and tuple(s.lower() for s in segs[1:]) in ENTRA_TAILS


def handle(cloud, req: Request) -> Response:
    """Answer with cloud.lock held; errors as Entra or Graph error bodies, never ARM's."""
    segs = [s for s in req.path.split("/") if s]
    with cloud.lock:
        try:
            if segs[0] == "v1.0":
                return graph.handle(cloud, req, segs[1:])
            methods = ENTRA_TAILS[tuple(s.lower() for s in segs[1:])]
            action = methods.get(req.method)
            if action is None:
                return Response(405, {"error": "invalid_request"}, {"Allow": ", ".join(methods)})
            return action(cloud, req, segs[0])
        except EntraError as err:
            return err.response
