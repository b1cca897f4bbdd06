"""What every workspace kind provides: the WorkspaceBackend protocol and the shapes it returns.

A backend is one object per kind, registered once in workspaces.backends.registry; the kinds
there are the valid values of Workspace.kind (no fixed list: see docs/adding-a-workspace-kind.md).
The state machine (workspaces.operations.workspace_advance), billing (billing.meters.usage_meter,
the spend page, right-sizing), node pool capacity (clusters.selectors), the idle scan
(workspaces.kube_activity), the views, the API and the task that refreshes owners' access ask
the registry for it instead of testing the kind.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable
from uuid import UUID

from common import words
from workspaces.gpus import format_gpus

if TYPE_CHECKING:
    from django import forms
    from django.contrib.auth.models import AnonymousUser, User

    from teams.models import Team
    from workspaces.chains import Next
    from workspaces.models import Workspace
    from workspaces.telemetry import ParsedSample


@dataclass(frozen=True)
class Meters:
    """What billing charges for a workspace of a kind: its compute meter runs while its status
    is in ``billable``, at ``hourly`` USD/hour (Decimal) x ``share`` (numerator, denominator)
    of it; ``os_disk`` says whether it also has an OS disk, billed from its first run until it
    is deleted (billing.meters.usage_meter)."""

    billable: frozenset[str]
    hourly: Decimal
    share: tuple[int, int] = (1, 1)
    os_disk: bool = False


@dataclass(frozen=True)
class ResizeChoice:
    """One size a workspace can move to (workspaces.resizes): ``key`` (the vm_size, or the MIG
    profile), what it holds (``gpu_model``, ``gpus`` against the quota: whole GPUs or
    sevenths, and ``gpu_memory_gib`` in total, GiB) and ``price_per_hour`` (USD/hour, Decimal,
    what the workspace would be billed). Sources: the platform admin's SizeOffering catalog
    (Azure Retail Prices; GPU memory from Microsoft's size documentation), or the cluster's
    MIG pools and their node price."""

    key: str
    label: str
    gpu_model: str
    gpus: Fraction
    gpu_memory_gib: int
    price_per_hour: Decimal

    @property
    def gpus_label(self) -> str:
        """What it holds in words, for the resize form's GPUs column: "1 × A100 GPU",
        "2 × A100 GPUs", or a MIG slice's "1/7 of an A100 GPU"."""
        if self.gpus.denominator == 1:
            return words.times(self.gpus.numerator, self.gpu_model)
        share = format_gpus(self.gpus)
        return f"{share} of {words.with_article(self.gpu_model)} GPU"


@dataclass(frozen=True)
class Words:
    """A kind's own words on its workspace page (templates/workspaces/_telemetry.html,
    _status_panel.html), so no page speaks of SSH, a VM or an agent to a kind without one:
    ``idle_when`` what idle means ("{threshold}" is the team's GPU threshold, percent),
    ``idle_unmeasured`` the same where no GPU utilisation is measured (a MIG slice without
    DCGM: NVML has no counter per MIG device), ``readings_from`` where the readings come from
    (before its note, e.g. NVML's error), ``no_reading`` before the first reading while
    running, ``sessions`` the label of its interactive sessions ("" where it has none),
    ``cpu`` whether its readings carry CPU use, and ``waiting_for`` / ``nothing_made`` for a
    request that waits."""

    idle_when: str
    idle_unmeasured: str
    readings_from: str
    no_reading: str
    sessions: str
    cpu: bool
    waiting_for: str
    nothing_made: str


@dataclass(frozen=True)
class Step:
    """The outcome of one look at an operation in flight: ``done`` (move on to the operation's
    status), else ``waiting`` (why it is not done yet, shown to the user; "" while simply in
    flight)."""

    done: bool
    waiting: str = ""


@dataclass(frozen=True)
class IdeTarget:
    """Where a running workspace's JupyterLab listens, as the portal's app proxy reaches it
    (apps_proxy): ``host`` a VM's private address or a Service's cluster DNS name, ``port``,
    and ``token``, JupyterLab's own, which the proxy adds to each request and no browser
    sees. ``vscode``: VS Code in the browser (code-server) beside it, where the workspace runs
    one: its own IdeTarget with no token and the ``cookie`` ("name=value") the proxy adds to
    each request instead, code-server's session; None where it runs none."""

    host: str
    port: int
    token: str
    cookie: str = ""
    vscode: IdeTarget | None = None


@dataclass(frozen=True)
class ApiField:
    """One field of a kind's own in the body of POST /api/v1/workspaces (docs/api.md): its
    ``name``, Python ``type`` (str, int, bool or Decimal), bounds (``max_length`` for text;
    ``ge``/``le`` for numbers), whether text may span lines (``multiline``), and whether the
    kind ``required``s it (the OpenAPI document says so). A field not required defaults to ""
    for text, False, or None. Kinds may share a field by its name (the first registered
    kind's bounds are the document's)."""

    name: str
    type: type
    max_length: int | None = None
    ge: int | Decimal | None = None
    le: int | Decimal | None = None
    multiline: bool = False
    required: bool = False


def _no_api_data(values: Mapping[str, Any], form: Any, user: User) -> dict[str, str]:
    return {}


@dataclass(frozen=True)
class KindForm:
    """How a kind is requested, on its page and through the API.

    The page: ``path`` under /workspaces/new/ ("" for /workspaces/new/ itself), the URL
    ``name``, the ``template`` (by default one that shows the form's fields in order), the
    ``form_class`` (bound as ``form_class(data, teams=, user=, **choices(team))``; it
    subclasses workspaces.forms.MountsFormMixin), ``choices(team)``, the form's kind-specific
    keyword arguments (e.g. the MIG profiles the team's pools offer; ``team`` may be None),
    and ``request(user=, team=, name=, request_key=, justification=, now=, data=, mounts=)``,
    the service that asks for the workspace from the form's cleaned ``data`` and passes
    ``mounts`` (a hooks.MountChoice) to its Ask (raises WorkspaceActionError,
    JustificationNeeded, NameTaken, MountRefused). ``view`` is the dotted path of a page
    view of the kind's own ("" for workspaces.views.workspace_request_kind; it is called
    with ``kind``).

    The API (api.routers.workspace_requests): ``api_fields`` of its body, and
    ``api_form_data(values, form, user)``, the form's data of the kind's own fields from the
    body's ``values`` (by the API's names; ``form`` is bound, with its choices), so the API
    runs the page's form and service; ``api_names`` maps a form field to the API's name in
    errors (``{"offering": "vm_size"}``)."""

    path: str
    name: str
    form_class: Callable[..., forms.Form]  # (data, teams=, **choices(team))
    choices: Callable[[Team | None], dict[str, Any]]
    request: Callable[..., Workspace]
    template: str = "workspaces/request_kind.html"  # every field of the form, in order
    view: str = ""
    api_fields: tuple[ApiField, ...] = ()
    api_form_data: Callable[[Mapping[str, Any], Any, User], dict[str, str]] = _no_api_data
    api_names: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class PoolUse:
    """How a kind's workspaces use their node pool's capacity (clusters.selectors): a
    workspace in a ``holding`` status holds capacity, one in a ``waiting`` status waits for
    it; each counts as one instance (a MIG slice), or, with ``units_field``, as that
    Workspace field's value (``gpu_count``: a namespace's GPU quota). With ``queue_for_room``,
    a request (or a queued start) that finds no free unit on its pool waits in the fair queue
    (scheduling.room asks clusters.pool_room) rather than being made to wait on the pool."""

    holding: frozenset[str]
    waiting: frozenset[str] = frozenset()
    units_field: str = ""
    queue_for_room: bool = False


@dataclass(frozen=True)
class RightsizeOption:
    """Something a workspace could move to, in its region, for right-sizing
    (billing.rightsizing): ``kind``, ``name`` (a VM size, or the MIG profile), ``mig_profile``
    ("" for a whole size; a share of a GPU otherwise, which right-sizing calls "A MIG
    slice"), ``gpu_model``, ``devices`` (GPUs or MIG devices it gets; a fractional vGPU size
    is one), ``memory_mib`` per device and ``price_per_hour`` (USD, Decimal)."""

    kind: str
    name: str
    gpu_model: str
    devices: int
    memory_mib: int
    price_per_hour: Decimal
    mig_profile: str = ""


# Right-sizing options by (team id, region); a team id of None: for every team.
RightsizeOptions = Mapping[tuple[int | None, str], list[RightsizeOption]]


@dataclass(frozen=True)
class SizingOffer:
    """Something of a kind a team could request, as right-sizing compares them (see
    workspaces.sizing.fits): ``name`` as requested (a VM size, or "A100 1g.10gb"),
    ``vm_size`` (the VM's, or the MIG pool's node size), ``mig_profile`` ("" for a whole-GPU
    size), ``region``, ``gpu_model``, ``gpus`` (GPU devices it sees), ``gpu_memory_gib`` (GiB
    per device), ``gpu_share`` (GPUs it counts against the team's quota of ``gpu_model``) and
    ``price_per_hour`` (USD, Linux pay-as-you-go), ``suits`` (workspaces.suitability.Suits)."""

    kind: str
    name: str
    vm_size: str
    mig_profile: str
    region: str
    gpu_model: str
    gpus: int
    gpu_memory_gib: Decimal
    gpu_share: Fraction
    price_per_hour: Decimal
    suits: str = ""  # training, inference or both (workspaces.suitability)

    @property
    def total_gpu_memory_gib(self) -> Decimal:
        """GiB of GPU memory across its devices."""
        return self.gpus * self.gpu_memory_gib


@runtime_checkable
class WorkspaceBackend(Protocol):
    """One workspace kind. Errors: CloudError from the provider (transient ones are retried by
    the caller), WorkspaceActionError for what a user may not ask."""

    kind: str  # what Workspace.kind stores ("vm"): at most 16 characters
    label: str  # what users read ("GPU VM"): the kind tabs, filters, lists, the spend page
    spend_colour: str  # its series on the spend chart and its column ("#2b6cb0")
    # Where its operations run, for messages ("Azure", "Kubernetes").
    service: str
    form: KindForm  # how it is requested, on its page and through the API
    # How its workspaces use node pools' capacity (clusters.selectors); None: they use none.
    pool_use: PoolUse | None
    # Its page's words and parts (templates/workspaces/_status_panel.html, detail.html):
    where: str  # where its operations run: "Azure", "the cluster"
    error_source: str  # whose error codes it shows: "Azure", "Kubernetes or Azure"
    stop_label: str  # the Stop button
    delete_warning: str  # what a delete removes: "The VM, its NIC and its OS disk"
    # Whether its delete may keep a snapshot of its OS disk, from which a new workspace of
    # the kind starts (Workspace.keep_snapshot, from_snapshot; docs/storage.md).
    disk_snapshots: bool
    # Told to whoever is handed a leaver's workspace (workspaces.leavers): what access stays
    # with the leaver; "{leaver}" is their username.
    hand_over_note: str
    # Its facts in the page's list (templates/workspaces/kinds/; generic_facts.html shows
    # its label, size, region and price).
    facts_template: str
    resizable: bool  # whether the page offers Resize (resize_choices, workspaces.resizes)
    connect_template: str  # how to reach it while running (or kinds/generic_connect.html)
    words: Words  # its own words on its page (Words)
    # How its price is made, for the spend page's note ("" when it is the size's own price).
    price_note: str
    # Whether it is an Azure VM of its own that may run as Spot: right-sizing proposes Spot
    # only then (billing.rightsizing).
    spot_capable: bool

    def advance(self, workspace: Workspace, clock: Callable[[], datetime]) -> Next:
        """Begin the operation the workspace's status owes (create, deallocate, start,
        delete) if it was not sent yet, else poll it; move the status on when done."""
        ...

    def clean_up_failed_create(self, workspace: Workspace) -> None:
        """Remove what a refused create left, so nothing is billed or orphaned."""
        ...

    def gpu_share(self, workspace: Workspace) -> Fraction:
        """GPUs the workspace counts against its team's quota of its GPU model."""
        ...

    def size_label(self, workspace: Workspace) -> str:
        """Its size as every page, email, API answer and CLI line names it
        (Workspace.size_label): a VM's size ("Standard_NC24ads_A100_v4"), a MIG slice's GPU
        model and profile ("A100 1g.10gb"), a namespace's GPU quota ("2 × A100 GPUs")."""
        ...

    def meters(self, workspace: Workspace) -> Meters:
        """What billing charges for it (see Meters)."""
        ...

    def api_details(self, workspace: Workspace) -> dict[str, str | int | bool | None]:
        """Its own facts in the API's workspace object (``details``, docs/api.md), besides the
        fields every kind's object has; from its own row only (a list answers many)."""
        ...

    def detail_context(self, workspace: Workspace, user: User | AnonymousUser) -> dict[str, object]:
        """Extra context of the workspace page for ``user`` (connect information: a Jupyter
        token, whether their Entra ID identity is missing); {} when none."""
        ...

    def connect_download(self, workspace: Workspace) -> tuple[str, bytes] | None:
        """A file that connects to it (an AKS kubeconfig), as (file name, body); None for a
        kind without one. Raises CloudError."""
        ...

    def ide_target(self, workspace: Workspace) -> IdeTarget | None:
        """Where its JupyterLab listens while it runs (IdeTarget); None for a workspace that
        runs none (a VM without an environment, a namespace)."""
        ...

    def idle_evidence(self, now: datetime) -> list[tuple[UUID, list[ParsedSample]]]:
        """Samples the portal collects itself for this kind's running workspaces, as
        [(workspace id, [sample])]; [] for kinds whose agent reports on its own."""
        ...

    def access_to_refresh(self, *, owner: User) -> list[UUID]:
        """Ids of ``owner``'s workspaces whose provider objects name their owner's identity
        (see access_refresh), after the owner changed it."""
        ...

    def access_refresh(self, workspace: Workspace) -> None:
        """Make the workspace's provider objects grant its owner's identity as it is now
        (nothing for one whose objects do not exist). Raises CloudError."""
        ...

    def resize_choices(self, workspace: Workspace, now: datetime) -> list[ResizeChoice]:
        """The sizes the workspace can move to (workspaces.resizes), not its own; [] for a
        kind that cannot be resized. Its ``advance`` carries out Resizing."""
        ...

    def sizing_offers(self, *, team: Team | None) -> list[SizingOffer]:
        """What of this kind ``team`` (or anyone, for None) could request now, for the GPU
        memory estimate (workspaces.sizing.fits); [] for a kind it does not propose."""
        ...

    def rightsizing_options(self, *, regions: set[str]) -> RightsizeOptions:
        """What a workspace in one of ``regions`` could move to, for right-sizing
        (billing.recommendations), by (team id or None for every team, region); {} for a kind
        it does not propose."""
        ...
