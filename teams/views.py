"""Team pages: teams overview, a team's page (members, usage, increase requests), quota
settings, the platform admins' approval queue and the audit log.

Every team is looked up in the user's visible scope first (a stranger gets 404), then the
permission from teams/rules.py is checked (a member without the right gets 403). htmx
requests get the changed section as a partial.
"""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from common.permissions import access_require
from common.validation import text_problem
from teams import (
    account_merge,
    accounts,
    entra_link,
    entra_oidc,
    hooks,
    limits,
    memberships,
    policies,
    selectors,
)
from teams.audit_display import audit_rows
from teams.forms import (
    EntraIdentityForm,
    GroupLinkForm,
    IdlePolicyForm,
    IncreaseForm,
    InviteForm,
    LeaverPolicyForm,
    LimitsForm,
    PersonalSetupForm,
    RoleForm,
)
from teams.models import IdleBounds, IdlePolicy, Membership, Profile, Team


def _team(request, slug: str, perm: str) -> Team:
    """The team from the user's visible scope (404 otherwise) on which the user has ``perm``
    (403 otherwise)."""
    try:
        team = selectors.team_get(user=request.user, slug=slug)
    except Team.DoesNotExist:
        raise Http404("No such team.") from None
    access_require(user=request.user, perm=perm, obj=team)
    return team


@login_required
@require_http_methods(["GET", "POST"])
def account(request):
    """The user's own account: the Entra ID identity their MIG slices let port-forward, and
    their own setup for new VMs (dotfiles, a setup script). Each form posts on its own."""
    profile = Profile.objects.filter(user=request.user).first() or Profile(user=request.user)
    posted = request.POST if request.method == "POST" else None
    which = posted.get("form") if posted else None
    initial = {"entra_object_id": profile.entra_object_id, "entra_upn": profile.entra_upn}
    form = EntraIdentityForm(posted if which != "personal" else None, initial=initial)
    personal = PersonalSetupForm(
        posted if which == "personal" else None,
        initial={"dotfiles_url": profile.dotfiles_url, "setup_script": profile.setup_script},
    )
    if which == "personal" and personal.is_valid():
        accounts.personal_setup_set(
            user=request.user,
            dotfiles_url=personal.cleaned_data["dotfiles_url"],
            setup_script=personal.cleaned_data["setup_script"],
            now=timezone.now(),
        )
        messages.success(request, "Saved. Your next new VM runs this setup.")
        return redirect("account")
    if posted is not None and which != "personal" and form.is_valid():
        accounts.entra_identity_set(
            user=request.user,
            object_id=form.cleaned_data["entra_object_id"],
            upn=form.cleaned_data["entra_upn"],
            now=timezone.now(),
        )
        messages.success(request, "Saved. Your MIG slices let this identity port-forward.")
        return redirect("account")
    return render(request, "teams/account.html", {"form": form, "personal": personal})


def _page_context(request, team: Team, **forms) -> dict:
    user = request.user
    return {
        "team": team,
        "row": hooks.team_overview_one(user=user, team=team, now=timezone.now()),
        "members": selectors.team_members(team=team),
        "increases": selectors.team_increases_pending(team=team),
        "can_manage": user.has_perm("teams.manage_team", team),
        # Superusers pass every has_perm; those who set limits themselves do not ask.
        "can_request": user.has_perm("teams.request_increase", team)
        and not user.has_perm("teams.set_quota", team),
        "can_set_quota": user.has_perm("teams.set_quota", team),
        "can_merge": user.has_perm("teams.merge_accounts"),
        "role_choices": RoleForm.base_fields["role"].choices,
        "invite_form": forms.get("invite_form") or InviteForm(),
        # "Link a group" exists only with Entra ID sign-in on (nobody could sign in as one).
        "entra_enabled": entra_oidc.enabled(),
        "group_form": forms.get("group_form") or GroupLinkForm(),
        "increase_form": forms.get("increase_form") or IncreaseForm(),
        "members_error": forms.get("members_error", ""),
        "budget_alerts": selectors.budget_alert_list(team=team, now=timezone.now()),
        "leaver_form": forms.get("leaver_form")
        or LeaverPolicyForm(initial={"leaver_policy": team.leaver_policy}),
    }


def _section(request, team: Team, partial: str, status: int = 200, **forms):
    """The changed section for htmx, else the whole team page."""
    context = _page_context(request, team, **forms)
    return render(request, partial if request.htmx else "teams/detail.html", context, status=status)


@login_required
@require_GET
def team_detail(request, slug):
    team = _team(request, slug, "teams.view_team")
    return render(request, "teams/detail.html", _page_context(request, team))


@login_required
@require_POST
def team_invite(request, slug):
    team = _team(request, slug, "teams.manage_team")
    form = InviteForm(request.POST)
    status = 200
    if form.is_valid():
        try:
            membership = memberships.membership_invite(
                actor=request.user,
                team=team,
                identifier=form.cleaned_data["identifier"],
                role=form.cleaned_data["role"],
                now=timezone.now(),
            )
        except memberships.MembershipError as exc:
            form.add_error("identifier", str(exc))
            # 429 when paused; htmx swaps no 4xx answer into the page, so it gets the form.
            if isinstance(exc, memberships.InviteThrottled) and not request.htmx:
                status = 429
        else:
            messages.success(request, f"{membership.user.username} joined {team.name}.")
            if not request.htmx:
                return redirect("team-detail", slug=team.slug)
            form = None
    return _section(request, team, "teams/_members.html", status=status, invite_form=form)


@login_required
@require_POST
def team_group(request, slug):
    """Link the team to an Entra ID security group, or unlink it (team admins, platform
    admins; 404 while Entra ID sign-in is off). Refusals are the form's errors (400)."""
    team = _team(request, slug, "teams.manage_team")
    if not entra_oidc.enabled():
        raise Http404("Entra ID sign-in is off.")
    form = GroupLinkForm(request.POST)
    if form.is_valid():
        try:
            team = entra_link.team_group_link(
                actor=request.user, team=team, group_id=form.group(), now=timezone.now()
            )
        except entra_link.GroupLinkError as exc:
            form.add_error("group_id", str(exc))
        else:
            linked = team.entra_group_name or team.entra_group_id
            text = f"Linked to {linked}." if linked else "Unlinked from its Entra ID group."
            messages.success(request, text)
            if not request.htmx:
                return redirect("team-detail", slug=team.slug)
            form = None
    # htmx swaps no 4xx answer into the page, so it gets the form with its errors as a 200.
    status = 400 if form is not None and not request.htmx else 200
    return _section(request, team, "teams/_group.html", status=status, group_form=form)


def _member_change(request, team: Team, change) -> object:
    """Run ``change()`` (a membership service call); a refusal becomes the section's error."""
    try:
        change()
    except memberships.MembershipError as exc:
        return _section(request, team, "teams/_members.html", members_error=str(exc))
    if request.htmx:
        return _section(request, team, "teams/_members.html")
    return redirect("team-detail", slug=team.slug)


@login_required
@require_POST
def team_member_role(request, slug, pk):
    team = _team(request, slug, "teams.manage_team")
    form = RoleForm(request.POST)
    if not form.is_valid():
        return _section(request, team, "teams/_members.html", members_error="Choose a role.")
    return _member_change(
        request,
        team,
        lambda: memberships.membership_change_role(
            actor=request.user,
            team=team,
            membership_id=pk,
            role=form.cleaned_data["role"],
            now=timezone.now(),
        ),
    )


@login_required
@require_POST
def team_member_remove(request, slug, pk):
    team = _team(request, slug, "teams.manage_team")
    return _member_change(
        request,
        team,
        lambda: memberships.membership_remove(
            actor=request.user, team=team, membership_id=pk, now=timezone.now()
        ),
    )


@login_required
@require_POST
def team_member_merge(request, slug, pk):
    """A platform admin merges the member's local account into the Entra ID account named in
    the form (teams.account_merge); a refusal is the members section's error."""
    team = _team(request, slug, "teams.view_team")
    access_require(user=request.user, perm="teams.merge_accounts")
    membership = get_object_or_404(Membership.objects.select_related("user"), team=team, pk=pk)
    username = (request.POST.get("entra_username") or "").strip()[:150]
    # Unprintable text names no account (and PostgreSQL refuses a NUL in a query).
    named = username and text_problem(username) is None
    entra = User.objects.filter(username=username).first() if named else None
    if entra is None:
        error = "Name the Entra ID account to merge into (its username)."
        return _section(request, team, "teams/_members.html", members_error=error)
    try:
        moved = account_merge.account_merge(
            actor=request.user, local=membership.user, entra=entra, now=timezone.now()
        )
    except account_merge.MergeRefused as exc:
        return _section(request, team, "teams/_members.html", members_error=str(exc))
    messages.success(
        request,
        f"{membership.user.username} merged into {entra.username}: "
        f"{moved.get('workspaces', 0)} workspaces and {moved['memberships']} memberships moved.",
    )
    if request.htmx:
        return _section(request, team, "teams/_members.html")
    return redirect("team-detail", slug=team.slug)


@login_required
@require_POST
def team_increase(request, slug):
    team = _team(request, slug, "teams.request_increase")
    form = IncreaseForm(request.POST)
    if form.is_valid():
        data = form.cleaned_data
        limits.team_increase_request(
            actor=request.user,
            team=team,
            gpu_model=data["gpu_model"],
            gpus=data["gpus"],
            monthly_budget=data["monthly_budget"],
            justification=data["justification"],
            now=timezone.now(),
        )
        messages.success(request, "Your request was sent to the platform admins.")
        if not request.htmx:
            return redirect("team-detail", slug=team.slug)
        form = None
    return _section(request, team, "teams/_increase.html", increase_form=form)


@login_required
def team_quota(request, slug):
    team = _team(request, slug, "teams.set_quota")
    row = hooks.team_overview_one(user=request.user, team=team, now=timezone.now())
    if request.method == "POST":
        form = LimitsForm(request.POST)
        if form.is_valid():
            limits.team_limits_set(
                actor=request.user,
                team=team,
                gpu_quotas=form.gpu_quotas(),
                monthly_budget=form.cleaned_data["monthly_budget"],
                max_workspaces_per_user=form.cleaned_data["max_workspaces_per_user"],
                stop_at_budget=form.cleaned_data["stop_at_budget"],
                now=timezone.now(),
            )
            messages.success(request, f"Limits of {team.name} saved.")
            return redirect("team-list")
    else:
        form = LimitsForm(initial=LimitsForm.initial_for(team, row))
    return render(request, "teams/quota.html", {"team": team, "row": row, "form": form})


@login_required
def team_idle_policy(request, slug):
    """A team admin (or platform admin) sets the team's idle policy within IdleBounds."""
    team = _team(request, slug, "teams.manage_team")
    policy = IdlePolicy.objects.filter(team=team).first() or IdlePolicy(team=team)
    bounds = IdleBounds.current()
    form = IdlePolicyForm(request.POST or None, instance=policy, bounds=bounds)
    if request.method == "POST" and form.is_valid():
        policies.idle_policy_set(
            actor=request.user, team=team, values=form.cleaned_data, now=timezone.now()
        )
        messages.success(request, f"Idle policy of {team.name} saved.")
        return redirect("team-detail", slug=team.slug)
    return render(request, "teams/idle_policy.html", {"team": team, "form": form})


@login_required
@require_POST
def team_leaver_policy(request, slug):
    """A team admin (or platform admin) sets what happens to a leaver's workspaces."""
    team = _team(request, slug, "teams.manage_team")
    form = LeaverPolicyForm(request.POST)
    if not form.is_valid():
        return _section(request, team, "teams/_leaver_policy.html", status=400, leaver_form=form)
    policies.team_leaver_policy_set(
        actor=request.user,
        team=team,
        policy=form.cleaned_data["leaver_policy"],
        now=timezone.now(),
    )
    team.refresh_from_db()
    messages.success(request, f"Leaver policy of {team.name} saved.")
    if not request.htmx:
        return redirect("team-detail", slug=team.slug)
    return _section(request, team, "teams/_leaver_policy.html")


@login_required
@require_GET
def audit_log(request):
    """The audit rows the user may see, filtered by team, actor and action; 400 with the
    form's error for a filter that is not printable text of its field's length."""
    access_require(user=request.user, perm="teams.view_audit")
    filters, page = selectors.audit_page(user=request.user, params=request.GET)
    valid = filters.is_valid()
    data = filters.form.cleaned_data
    context = {
        "page": page,
        "rows": audit_rows(page.rows),
        "filters": {k: data.get(k, "") for k in ("team", "actor", "action")},
        "filter_errors": [e for errors in filters.errors.values() for e in errors],
        "choices": selectors.audit_filter_choices(user=request.user),
        "sort": page.sort.key,
    }
    template = "teams/_audit_rows.html" if request.htmx else "teams/audit.html"
    return render(request, template, context, status=200 if valid else 400)
