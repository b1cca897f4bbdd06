"""Migrating a database with data: each team gets the Entra ID group of its first cluster link
(clusters 0003 moves ClusterTeam.group_object_id to teams.Team.entra_group_id)."""

import uuid
from datetime import UTC, datetime

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("teams", "0010_profile_signin_object_id"), ("clusters", "0002_operation_chain")]
AFTER = [("clusters", "0003_team_entra_group")]
G1, G2 = uuid.UUID(int=1), uuid.UUID(int=2)


def _migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


@pytest.mark.django_db(transaction=True)
def test_each_team_takes_its_first_links_group_and_a_shared_group_goes_to_one_team():
    old = _migrate(BEFORE)
    Team = old.get_model("teams", "Team")
    Cluster = old.get_model("clusters", "AksCluster")
    Link = old.get_model("clusters", "ClusterTeam")
    vision, nlp, bio = (Team.objects.create(name=n, slug=n.lower()) for n in ("V", "N", "B"))
    a, b = (
        Cluster.objects.create(
            subscription_id=uuid.uuid4(),
            resource_group="rg",
            name=n,
            location="eastus",
            registered_at=datetime(2026, 11, 1, tzinfo=UTC),
        )
        for n in ("a", "b")
    )
    Link.objects.create(cluster=a, team=vision, group_object_id=G1, namespace="team-v")
    Link.objects.create(cluster=b, team=vision, group_object_id=G2, namespace="team-v")
    Link.objects.create(cluster=a, team=nlp, group_object_id=G2, namespace="team-n")
    Link.objects.create(cluster=b, team=bio, group_object_id=G1, namespace="team-b")

    new = _migrate(AFTER)
    groups = dict(new.get_model("teams", "Team").objects.values_list("name", "entra_group_id"))
    _migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())  # Back to the latest.

    # V: its first link's group; N: its own; B shared V's group: left for its admin to link.
    assert groups == {"V": G1, "N": G2, "B": None}
