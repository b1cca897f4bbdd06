"""Shapes shared by the routers: printable text types for bodies, the workspace object, and
the paging envelope (docs/api.md). Money goes out as a string of USD ("1.2340"), times as
ISO 8601 in UTC ("2026-11-24T17:00:00Z")."""

from datetime import UTC, datetime
from decimal import Decimal
from math import ceil
from typing import Annotated, Any
from urllib.parse import urlencode

from django.contrib.auth.models import User
from django.http import HttpRequest
from ninja import Schema
from ninja.errors import ValidationError
from pydantic import AfterValidator, Field

from common.validation import text_problem
from workspaces.backends import backend_for
from workspaces.models import Workspace

# The biggest page a caller may ask for: a page is one query whatever its size, but its
# JSON grows with it.
MAX_PAGE_SIZE = 200
DEFAULT_PAGE_SIZE = 50


def _printable(value: str) -> str:
    problem = text_problem(value)
    if problem:
        raise ValueError(f"Use printable text only. {problem}")
    return value


def _printable_multiline(value: str) -> str:
    problem = text_problem(value, multiline=True)
    if problem:
        raise ValueError(f"Use printable text only. {problem}")
    return value


# What common.validation.text_problem refuses, as the OpenAPI document's patterns (ECMA-262):
# controls (Unicode Cc) and the bidi controls; PrintableLines lets tabs and line breaks
# through. (Lone surrogates, refused too, cannot be written in a pattern that every
# validator compiles, Rust's regex among them.)
_REFUSED = r"\u007f-\u009f\u202a-\u202e\u2066-\u2069"
PRINTABLE_PATTERN = rf"^[^\u0000-\u001f{_REFUSED}]*$"
PRINTABLE_LINES_PATTERN = rf"^[^\u0000-\u0008\u000b\u000c\u000e-\u001f{_REFUSED}]*$"
# One line of printable text (no NUL, no control character); give its length with
# Field(max_length=...). PrintableLines may span lines.
Printable = Annotated[
    str, AfterValidator(_printable), Field(json_schema_extra={"pattern": PRINTABLE_PATTERN})
]
PrintableLines = Annotated[
    str,
    AfterValidator(_printable_multiline),
    Field(json_schema_extra={"pattern": PRINTABLE_LINES_PATTERN}),
]


def caller(request: HttpRequest) -> User:
    """The authenticated caller (every route sits behind api_auth, which sets request.user)."""
    user = request.user
    assert isinstance(user, User)
    return user


def money(value: Decimal | None, places: str = "0.0001") -> str | None:
    """USD as the API writes it: a string with four decimals (None stays None)."""
    return None if value is None else str(Decimal(value).quantize(Decimal(places)))


def utc(value: datetime | None) -> str | None:
    """An aware datetime as ISO 8601 in UTC with a Z (None stays None)."""
    if value is None:
        return None
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


class WorkspaceOut(Schema):
    """A workspace as every route answers it (docs/api.md)."""

    id: str
    name: str
    kind: str
    status: str
    status_label: str
    team: str
    owner: str
    vm_size: str
    size_label: str
    region: str
    gpu_model: str
    gpu_count: int
    mig_profile: str
    namespace: str
    spot: bool
    price_per_hour: str
    private_ip: str | None
    error_code: str
    error_message: str
    waiting_reason: str
    created_at: str
    status_changed_at: str
    url: str
    # Its kind's own facts (WorkspaceBackend.api_details): a VM's ssh_user, a MIG slice's image.
    details: dict[str, str | int | bool | None]


def workspace_out(workspace: Workspace) -> dict[str, Any]:
    """The workspace object of ``workspace`` (its team and owner loaded, or one query each)."""
    return {
        "id": str(workspace.pk),
        "name": workspace.name,
        "kind": workspace.kind,
        "status": workspace.status,
        "status_label": workspace.get_status_display(),
        "team": workspace.team.slug,
        "owner": workspace.owner.username,
        "vm_size": workspace.vm_size,
        "size_label": workspace.size_label,
        "region": workspace.region,
        "gpu_model": workspace.gpu_model,
        "gpu_count": workspace.gpu_count,
        "mig_profile": workspace.mig_profile,
        "namespace": workspace.namespace,
        "spot": workspace.spot,
        "price_per_hour": money(workspace.price_per_hour),
        "private_ip": workspace.private_ip or None,
        "error_code": workspace.error_code,
        "error_message": workspace.error_message,
        "waiting_reason": workspace.waiting_reason,
        "created_at": utc(workspace.created_at),
        "status_changed_at": utc(workspace.status_changed_at),
        "url": f"/api/v1/workspaces/{workspace.pk}",
        "details": backend_for(workspace.kind).api_details(workspace),
    }


def page_bounds(request: HttpRequest) -> tuple[int, int]:
    """(page, page_size) from the query string. Raises ninja's ValidationError (a 400 problem)
    for anything but whole numbers in 1..1,000,000 and 1..MAX_PAGE_SIZE."""
    errors = []
    values = {}
    for name, default, high in (
        ("page", 1, 1_000_000),
        ("page_size", DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE),
    ):
        raw = request.GET.get(name, "")
        try:
            value = int(raw) if raw != "" else default
        except ValueError:
            value = 0
        if not 1 <= value <= high:
            errors.append({"loc": ["query", name], "msg": f"Give a whole number from 1 to {high}."})
        values[name] = value
    if errors:
        raise ValidationError(errors)
    return values["page"], values["page_size"]


def envelope(
    request: HttpRequest, items: list[Any], *, count: int, page: int, size: int
) -> dict[str, Any]:
    """The paging envelope: items, count, page, pages (at least 1), next and previous as
    paths with the same query string (None at either end)."""
    pages = max(1, ceil(count / size))

    def link(number: int) -> str:
        params = request.GET.copy()
        params["page"] = str(number)
        return f"{request.path}?{urlencode(sorted(params.items()))}"

    return {
        "items": items,
        "count": count,
        "page": page,
        "pages": pages,
        "next": link(page + 1) if page < pages else None,
        "previous": link(page - 1) if 1 < page <= pages + 1 else None,
    }
