"""Which addresses a team's webhook may reach: the public internet only.

A team admin chooses a hook's URL and the worker posts to it, so a URL naming the portal's own
network (the database, Redis, the Azure instance metadata service, the cluster's API, a
colleague's VM) would let a team admin make the worker request it. Refused: loopback,
link-local, private (RFC 1918, IPv6 ULA), shared (100.64/10), reserved, unspecified and
multicast addresses, in any spelling (``0x7f000001``, ``2130706433``, IPv4-mapped IPv6), and
names of a cluster or a private zone (``*.svc``, ``*.cluster.local``, ``*.internal``,
``localhost``, single-label names).

Checked twice: when a hook is saved (``address_refusal`` on every address the host resolves
to), and at delivery against the address the socket actually connected to
(``peer_refusal``; notifications.webhook_delivery), so a name that resolves to a public address when
saved and to an internal one later (DNS rebinding) still fails. Plain-http loopback is allowed
where settings.WEBHOOK_ALLOW_LOOPBACK is on: the embedded demo and the tests, never production
(portal/settings.py refuses it there).
"""

import ipaddress
import socket

from django.conf import settings

# Host names (lowercased, without a trailing dot) that name a cluster's or a private network's
# services rather than the internet.
PRIVATE_SUFFIXES = (
    ".localhost",
    ".local",
    ".svc",
    ".cluster.local",
    ".internal",
    ".home.arpa",
    ".localdomain",
)
PRIVATE_NAMES = {"localhost", "kubernetes.default", "metadata", "metadata.azure.com"}
REFUSED = (
    "The URL must lead to a public internet address, not a loopback, private, link-local or "
    "cluster address."
)


def _internal(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return not ip.is_global or ip.is_multicast or ip.is_reserved or ip.is_unspecified


def ip_refusal(address: str, *, scheme: str) -> str | None:
    """Why the portal may not post to the IP ``address`` (a literal, as a socket gives it)
    over ``scheme``; None when it may. Loopback over plain http passes only while
    settings.WEBHOOK_ALLOW_LOOPBACK is on."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])  # drop an IPv6 zone id
    except ValueError:
        return REFUSED
    mapped = ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) else None
    if (mapped or ip).is_loopback and scheme == "http" and settings.WEBHOOK_ALLOW_LOOPBACK:
        return None
    return REFUSED if _internal(ip) else None


def _name_refused(host: str) -> bool:
    if host in PRIVATE_NAMES or host.endswith(PRIVATE_SUFFIXES):
        return True
    try:
        ipaddress.ip_address(host)
        return False
    except ValueError:
        # A single label ("redis", "postgres", "0x7f000001") is a local or numeric name, never
        # a public internet host; numeric ones are resolved and judged by their address.
        return "." not in host and not _numeric(host)


def _numeric(host: str) -> bool:
    try:
        socket.inet_aton(host)  # accepts 2130706433, 0x7f000001, 127.1
        return True
    except OSError:
        return False


def resolve(host: str, port: int) -> list[str]:
    """The addresses ``host`` resolves to now (numeric spellings included); [] when it does
    not resolve. Its own function so tests can stand in for DNS."""
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError, OSError):
        return []
    return [str(info[4][0]) for info in found]


def address_refusal(host: str, *, scheme: str, port: int) -> str | None:
    """Why a hook may not post to ``host`` (a URL's hostname) over ``scheme``; None when it
    may. Refuses private names and every host of which any resolved address is internal; a
    name that does not resolve now passes (delivery checks the address it connects to)."""
    host = host.lower().rstrip(".")
    if not host:
        return REFUSED
    loopback_name = host == "localhost" or host.endswith(".localhost")
    if loopback_name and scheme == "http" and settings.WEBHOOK_ALLOW_LOOPBACK:
        return None
    if _name_refused(host):
        return REFUSED
    for address in resolve(host, port):
        refusal = ip_refusal(address, scheme=scheme)
        if refusal:
            return refusal
    return None


def peer_refusal(sock: socket.socket, *, scheme: str) -> str | None:
    """Why the connected socket ``sock`` must not be used for a hook's POST over ``scheme``
    (its peer is internal); None when it may."""
    return ip_refusal(str(sock.getpeername()[0]), scheme=scheme)
