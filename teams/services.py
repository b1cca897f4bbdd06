"""The public face of teams' business rules, kept for the tests that reach them as
``teams.services.<name>``. The rules live in one module per concern; code imports those:

- teams.audit: the audit log (audit_record).
- notifications.notices: in-app notices with an email copy, resolved by what they are about.
- teams.quota_requests: approvals of workspace requests above quota; the approver's estimate.
- teams.memberships: invite, change role, remove (MembershipError, InviteThrottled).
- teams.limits: quotas and budgets; a team's requests for a permanent increase.
- teams.policies: idle and leaver policies.
- teams.accounts: a person's Entra identity; audit and unlock of login lockouts.
- teams.guards: the permission check and team-row lock every team-admin change passes.
"""

from notifications.notices import (
    Message,
    notice_about,
    notice_dismiss,
    notice_resolve,
    notice_send,
    notice_send_many,
)
from teams.accounts import entra_identity_set, login_lockout_record, login_lockout_reset
from teams.audit import audit_record
from teams.limits import (
    team_increase_approve,
    team_increase_reject,
    team_increase_request,
    team_limits_set,
)
from teams.memberships import (
    INVITE_REFUSED,
    NO_ACCOUNT,
    InviteThrottled,
    MembershipError,
    membership_change_role,
    membership_invite,
    membership_remove,
)
from teams.policies import idle_policy_set, team_leaver_policy_set
from teams.quota_requests import (
    DecisionError,
    cost_estimate,
    quota_request_approve,
    quota_request_open,
    quota_request_reject,
    quota_requests_expire,
)

__all__ = [
    "DecisionError",
    "INVITE_REFUSED",
    "InviteThrottled",
    "MembershipError",
    "Message",
    "NO_ACCOUNT",
    "audit_record",
    "cost_estimate",
    "entra_identity_set",
    "idle_policy_set",
    "login_lockout_record",
    "login_lockout_reset",
    "membership_change_role",
    "membership_invite",
    "membership_remove",
    "notice_about",
    "notice_dismiss",
    "notice_resolve",
    "notice_send",
    "notice_send_many",
    "quota_request_approve",
    "quota_request_open",
    "quota_request_reject",
    "quota_requests_expire",
    "team_increase_approve",
    "team_increase_reject",
    "team_increase_request",
    "team_leaver_policy_set",
    "team_limits_set",
]
