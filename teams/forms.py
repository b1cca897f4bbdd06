"""Forms of the team pages: they parse and validate input; the services apply it."""

from decimal import Decimal
from typing import TYPE_CHECKING, Any, cast
from uuid import UUID
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django import forms
from django.contrib.auth.forms import AuthenticationForm
from django.core.validators import (
    MaxLengthValidator,
    MaxValueValidator,
    MinValueValidator,
    RegexValidator,
)
from django.forms import BoundField
from django.http import HttpRequest

from agent.environment_init import Personal, personal_problems
from common.validation import TextField, validate_printable
from teams.models import (
    IDLE_FIELDS,
    ApiScope,
    GpuModel,
    IdleBounds,
    IdlePolicy,
    LeaverPolicy,
    Role,
    Team,
)

MAX_GPUS = 10_000  # more GPUs of one model than any team could hold: a typo
MAX_BUDGET = Decimal("10000000000")  # USD/month; max_digits=12 with 2 decimals
GPU_FIELD_PREFIX = "gpus_"


MAX_PASSWORD_LENGTH = 1024  # longer than any passphrase; bounds the hashing work per attempt


class LoginForm(AuthenticationForm):
    """Django's login form with its bounds enforced before any account is looked up.
    AuthenticationForm sets the username's max_length after the field is made, so it never
    gets a MaxLengthValidator: a 10,000-character name reached authenticate(), and
    django-axes' record of the failure (username varchar(255)) broke with a 500 on
    PostgreSQL."""

    def __init__(self, request: HttpRequest | None = None, *args: Any, **kwargs: Any) -> None:
        super().__init__(request, *args, **kwargs)
        username = cast(forms.CharField, self.fields["username"])
        username.validators += [MaxLengthValidator(username.max_length), validate_printable]
        self.fields["password"].validators.append(MaxLengthValidator(MAX_PASSWORD_LENGTH))


class InviteForm(forms.Form):
    identifier = TextField(
        label="Username or email",
        max_length=254,
        help_text="Of an existing portal account.",
    )
    role = forms.ChoiceField(choices=Role.choices, initial=Role.RESEARCHER)


class GroupLinkForm(forms.Form):
    """Link a team to an Entra ID security group by its object id, or unlink it (``unlink``)."""

    group_id = forms.UUIDField(
        label="Entra ID group object id",
        required=False,
        help_text="Object ID on the group's Overview in the Entra admin center; a security "
        "group. Its members sign in as this team's members.",
        error_messages={"invalid": "An object id looks like 0f6d3b2a-8c4e-4f1a-9b7d-2e5c6a7b8c01."},
    )
    unlink = forms.BooleanField(required=False, widget=forms.HiddenInput)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if not data.get("unlink") and not data.get("group_id") and "group_id" not in self.errors:
            self.add_error("group_id", "Enter the group's object id.")
        return data

    def group(self) -> UUID | None:
        """The group to link, or None to unlink."""
        return None if self.cleaned_data["unlink"] else self.cleaned_data["group_id"]


class AuditFilterForm(forms.Form):
    """The audit page's filters, from its query string; each may be empty (all)."""

    team = TextField(max_length=50, required=False)
    actor = TextField(max_length=150, required=False)
    action = TextField(max_length=64, required=False)


class DecisionForm(forms.Form):
    """A platform admin's optional comment on approving or rejecting a request."""

    comment = TextField(max_length=2000, required=False)


class EntraIdentityForm(forms.Form):
    """The user's own Entra ID identity (teams.models.Profile); both fields may be empty."""

    entra_upn = TextField(
        label="User principal name",
        required=False,
        max_length=113,
        validators=[
            RegexValidator(
                r"^[^@\s]+@[^@\s]+$", "Enter a user principal name, e.g. alice@contoso.com."
            )
        ],
        help_text="How AKS knows a member of your organisation's tenant, e.g. alice@contoso.com.",
    )
    entra_object_id = forms.UUIDField(
        label="Object id",
        required=False,
        help_text="How AKS knows a guest. Both: az ad signed-in-user show --query "
        "'{upn:userPrincipalName,oid:id}'",
    )


class PersonalSetupForm(forms.Form):
    """The user's own setup for new VMs (teams.models.Profile); both fields may be empty."""

    dotfiles_url = TextField(
        label="Dotfiles repository",
        required=False,
        max_length=300,
        help_text="An https:// Git URL, cloned to ~/.dotfiles on each new VM after its "
        "environment; its install.sh (or bootstrap.sh, setup.sh ...) runs as you.",
    )
    setup_script = TextField(
        label="Setup script",
        required=False,
        multiline=True,
        strip=False,  # the script as typed; line ends made Unix's in clean()
        max_length=16 * 1024,
        widget=forms.Textarea(attrs={"rows": 6, "spellcheck": "false"}),
        help_text="Shell commands run as you after the dotfiles, on each new VM. Put no "
        "secret here: the VM's custom data carries it.",
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        # Browsers send a textarea's lines with CRLF, which bash would read as part of a word.
        if "setup_script" in data:
            data["setup_script"] = data["setup_script"].replace("\r\n", "\n")
        personal = Personal(
            dotfiles_url=data.get("dotfiles_url", "").strip(),
            setup_script=data.get("setup_script", ""),
        )
        for field, problem in personal_problems(personal).items():
            self.add_error(field, problem)
        return data


class RoleForm(forms.Form):
    role = forms.ChoiceField(choices=Role.choices)


class ApiTokenForm(forms.Form):
    """A new personal access token (teams.tokens.api_token_create checks the same bounds)."""

    name = TextField(
        max_length=64, help_text="What uses it, e.g. my laptop or the nightly pipeline."
    )
    scope = forms.ChoiceField(
        choices=ApiScope.choices,
        initial=ApiScope.READ,
        help_text="Read and write may request, stop and delete workspaces.",
    )
    expires_in_days = forms.IntegerField(
        label="Expires in (days)",
        min_value=1,
        max_value=365,
        initial=30,
        help_text="From 1 to 365 days.",
    )


def _budget_field(label: str, required: bool = False) -> forms.DecimalField:
    return forms.DecimalField(
        label=label,
        required=required,
        min_value=Decimal(0),
        max_value=MAX_BUDGET,
        max_digits=12,
        decimal_places=2,
        help_text="USD per month.",
    )


class IncreaseForm(forms.Form):
    """A team admin's request: GPUs of one model in all, and/or a monthly budget."""

    gpu_model = forms.ChoiceField(
        label="GPU model", choices=[("", "—")] + list(GpuModel.choices), required=False
    )
    gpus = forms.IntegerField(
        label="GPUs wanted in all", required=False, min_value=0, max_value=MAX_GPUS
    )
    monthly_budget = _budget_field("Monthly budget wanted")
    justification = TextField(
        multiline=True,
        max_length=2000,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Why the team needs it, for the platform admins.",
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if self.errors:
            return data
        model, gpus = data.get("gpu_model"), data.get("gpus")
        if bool(model) != (gpus is not None):
            raise forms.ValidationError("Give both a GPU model and a number of GPUs.")
        if not model and data.get("monthly_budget") is None:
            raise forms.ValidationError("Ask for GPUs of a model, a monthly budget, or both.")
        return data


class LimitsForm(forms.Form):
    """A platform admin sets a team's GPU quota per model, monthly budget and per-member cap.
    One ``gpus_<model>`` field per known GPU model; a posted ``gpus_<other>`` is an error."""

    monthly_budget = _budget_field("Monthly budget (empty: no limit)")
    max_workspaces_per_user = forms.IntegerField(
        label="Workspaces per member", min_value=0, max_value=1000
    )
    stop_at_budget = forms.BooleanField(
        label="Stop running workspaces at 100% of the budget",
        required=False,
        widget=forms.CheckboxInput(attrs={"aria-describedby": "stop-help"}),
        help_text=(
            "When the month's spend reaches the budget, every running workspace of the team is "
            "stopped (deallocated, disks kept) and the team is told. Off: they keep running and "
            "only new requests wait for approval."
        ),
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for value, label in GpuModel.choices:
            self.fields[GPU_FIELD_PREFIX + value] = forms.IntegerField(
                label=f"{label} GPUs",
                required=False,
                min_value=0,
                max_value=MAX_GPUS,
                help_text="GPUs held at once without approval; empty means 0.",
            )

    def clean(self) -> dict[str, Any] | None:
        data = super().clean()
        unknown = [
            key.removeprefix(GPU_FIELD_PREFIX)
            for key in (self.data or {})
            if key.startswith(GPU_FIELD_PREFIX) and key not in self.fields
        ]
        if unknown:
            raise forms.ValidationError(f"Unknown GPU model: {', '.join(sorted(unknown))}.")
        return data

    def gpu_fields(self) -> list[BoundField]:
        return [self[GPU_FIELD_PREFIX + value] for value, _ in GpuModel.choices]

    def gpu_quotas(self) -> dict[str, int]:
        """{"A100": 4, ...} for every known model (0 where left empty)."""
        return {
            value: self.cleaned_data.get(GPU_FIELD_PREFIX + value) or 0
            for value, _ in GpuModel.choices
        }

    @staticmethod
    def initial_for(team: Team, row: Any) -> dict[str, Any]:
        """Initial values from the team and its team_overview row."""
        initial = {
            "monthly_budget": team.monthly_budget,
            "max_workspaces_per_user": team.max_workspaces_per_user,
            "stop_at_budget": team.stop_at_budget,
        }
        for line in row.lines:
            initial[GPU_FIELD_PREFIX + line.gpu_model] = line.quota
        return initial


# ModelForm is generic for mypy (django-stubs) only: subscripted at run time it raises.
if TYPE_CHECKING:
    _IdlePolicyModelForm = forms.ModelForm[IdlePolicy]
else:
    _IdlePolicyModelForm = forms.ModelForm


class IdlePolicyForm(_IdlePolicyModelForm):
    """A team's idle policy, checked against the platform admins' IdleBounds."""

    class Meta:
        model = IdlePolicy
        fields = list(IDLE_FIELDS)
        labels = {
            "gpu_threshold": "GPU busy threshold (%)",
            "idle_minutes": "Stop after idle for (minutes)",
            "warn_minutes": "Warn this long before a stop (minutes)",
            "extensions_per_day": "Keep-running extensions per day",
            "extension_hours": "Hours per extension",
            "nightly_stop": "Nightly stop (local time, empty: none)",
            "timezone": "Team time zone",
            "max_lifetime_hours": "Maximum lifetime (hours, empty: none)",
            "silent_minutes": "Stop after no telemetry for (minutes)",
        }
        widgets = {"nightly_stop": forms.TimeInput(attrs={"type": "time"}, format="%H:%M")}

    def __init__(self, *args: Any, bounds: IdleBounds, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.bounds = bounds
        limits = {
            "gpu_threshold": (1, bounds.max_gpu_threshold),
            "idle_minutes": (bounds.min_idle_minutes, bounds.max_idle_minutes),
            "warn_minutes": (1, bounds.max_idle_minutes),
            "extensions_per_day": (0, bounds.max_extensions_per_day),
            "extension_hours": (1, bounds.max_extension_hours),
            "max_lifetime_hours": (1, bounds.max_lifetime_hours),
            "silent_minutes": (bounds.min_idle_minutes, 24 * 60),
        }
        for name, (low, high) in limits.items():
            field = cast(forms.IntegerField, self.fields[name])  # each a number of the model
            field.min_value, field.max_value = low, high
            field.validators = [MinValueValidator(low), MaxValueValidator(high)]
            field.widget.attrs.update({"min": low, "max": high})
            field.help_text = f"From {low} to {high}, set by the platform admins."

    def clean_timezone(self) -> str:
        name = str(self.cleaned_data["timezone"]).strip()
        try:
            ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError):
            raise forms.ValidationError(
                f"'{name}' is not a time zone (e.g. Europe/Berlin)."
            ) from None
        return name

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        warn, idle_ = data.get("warn_minutes"), data.get("idle_minutes")
        if warn is not None and idle_ is not None and warn >= idle_:
            self.add_error(
                "warn_minutes", "The warning must come before the stop: less than the idle minutes."
            )
        return data


class LeaverPolicyForm(forms.Form):
    """What happens to a member's workspaces in the team when they leave it."""

    leaver_policy = forms.ChoiceField(
        label="When a member leaves, their workspaces",
        choices=LeaverPolicy.choices,
        help_text=(
            "Hand over goes to the longest-standing team admin (stop if there is none). "
            "A VM handed over keeps the leaver's SSH key."
        ),
    )
