"""The audit log as people read it (templates/teams/_audit_rows.html): each entry's object by
its name with a link to its page, and what changed in words ("Gpu quota A100: 4 → 8"), not the
stored dicts of whole objects or "teams.QuotaRequest #2".

Reads only: the entries' objects are loaded by type in one query each (a page of 50 entries
holds a handful of types). Links are URL names, so teams never imports the apps above it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from django.apps import apps
from django.urls import reverse

from common.words import stored_label
from teams.models import AuditEntry, Team


@dataclass(frozen=True)
class AuditRow:
    """One entry as shown: ``entry``, its object's ``object_text`` and ``object_url`` ("" when
    it has no page or is gone), and ``changes``: one sentence per field that differs between
    before and after ("Role: researcher → team admin"; "Name: set to vision" when new)."""

    entry: AuditEntry
    object_text: str
    object_url: str
    changes: list[str]


Describe = Callable[[Any], tuple[str, str]]  # object -> (words, URL or "")


def _team(team: Team) -> tuple[str, str]:
    return team.name, reverse("team-detail", kwargs={"slug": team.slug})


# label -> (related fields to load, how to name and link the object)
DESCRIBE: dict[str, tuple[tuple[str, ...], Describe]] = {
    "teams.Team": ((), _team),
    "teams.QuotaRequest": (
        ("workspace",),
        lambda r: (
            f"request for workspace {r.workspace.name}",
            reverse("workspaces:detail", kwargs={"pk": r.workspace_id}),
        ),
    ),
    "teams.TeamQuotaIncrease": (
        ("team",),
        lambda i: (f"increase for {i.team.name}", _team(i.team)[1]),
    ),
    "teams.Membership": (
        ("user", "team"),
        lambda m: (f"{m.user.username} in {m.team.name}", _team(m.team)[1]),
    ),
    "notifications.Webhook": (
        ("team",),
        lambda h: (
            f"webhook {h.name} of {h.team.name}",
            reverse("team-webhooks", kwargs={"slug": h.team.slug}),
        ),
    ),
    "teams.Profile": (("user",), lambda p: (f"{p.user.username}'s sign-in identity", "")),
    "teams.ApiToken": (("user",), lambda t: (f"API token {t.name} of {t.user.username}", "")),
    "auth.User": ((), lambda u: (f"user {u.username}", "")),
    "workspaces.Workspace": (
        (),
        lambda w: (f"workspace {w.name}", reverse("workspaces:detail", kwargs={"pk": w.pk})),
    ),
    "clusters.AksCluster": (
        (),
        lambda c: (f"cluster {c.name}", reverse("clusters:detail", kwargs={"pk": c.pk})),
    ),
    "clusters.NodePool": (
        ("cluster",),
        lambda p: (
            f"node pool {p.name} of {p.cluster.name}",
            reverse("clusters:detail", kwargs={"pk": p.cluster_id}),
        ),
    ),
}


def audit_rows(entries: Iterable[AuditEntry]) -> list[AuditRow]:
    """The entries as AuditRows, in their order. One query per object type among them."""
    entries = list(entries)
    found = _objects(entries)
    rows = []
    for e in entries:
        obj = found.get((e.object_type, e.object_id))
        text, url = _describe(e, obj)
        rows.append(AuditRow(e, text, url, changes(e.before, e.after)))
    return rows


def _objects(entries: list[AuditEntry]) -> dict[tuple[str, str], Any]:
    ids: dict[str, set[str]] = defaultdict(set)
    for e in entries:
        ids[e.object_type].add(e.object_id)
    found = {}
    for type_label, pks in ids.items():
        try:
            model = apps.get_model(type_label)
        except (LookupError, ValueError):
            continue
        related = DESCRIBE.get(type_label, ((), None))[0]
        try:
            objects = model._base_manager.select_related(*related).in_bulk(list(pks))
        except (ValueError, TypeError):  # an id of another shape than the model's key
            continue
        found.update({(type_label, str(pk)): obj for pk, obj in objects.items()})
    return found


def _describe(entry: AuditEntry, obj: Any) -> tuple[str, str]:
    noun = entry.object_type.rsplit(".", 1)[-1]
    words = " ".join(_split_camel(noun)).lower()
    if obj is None:
        return f"{words} #{entry.object_id} (since deleted)", ""
    describe = DESCRIBE.get(entry.object_type, ((), None))[1]
    if describe is None:
        return str(obj), ""
    return describe(obj)


def _split_camel(name: str) -> list[str]:
    parts, word = [], ""
    for ch in name:
        if ch.isupper() and word and not word[-1].isupper():
            parts.append(word)
            word = ""
        word += ch
    return [*parts, word] if word else parts


def changes(before: Any, after: Any) -> list[str]:
    """One sentence per field whose value differs, nested dicts flattened ("Quota A100: 4 →
    8"); a field only after reads "set to", only before "removed (was ...)"."""
    old, new = _flat(before), _flat(after)
    lines = []
    for key in [*new, *(k for k in old if k not in new)]:
        was, now = old.get(key, _MISSING), new.get(key, _MISSING)
        if was == now:
            continue
        name = _key_words(key)
        if was is _MISSING:
            lines.append(f"{name}: set to {_value(now)}")
        elif now is _MISSING:
            lines.append(f"{name}: removed (was {_value(was)})")
        else:
            lines.append(f"{name}: {_value(was)} → {_value(now)}")
    return lines


_MISSING = object()


def _flat(value: Any, prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], Any]:
    if not isinstance(value, dict):
        return {prefix: value} if prefix else {}
    flat: dict[tuple[str, ...], Any] = {}
    for key, inner in value.items():
        flat.update(_flat(inner, (*prefix, str(key))))
    return flat


def _key_words(key: tuple[str, ...]) -> str:
    words = " ".join(part.replace("_", " ") for part in key)
    return words[:1].upper() + words[1:]


def _value(value: Any) -> str:
    if value is None or value == "":
        return "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return ", ".join(_value(v) for v in value) if value else "none"
    return stored_label(value) if isinstance(value, str) else str(value)
