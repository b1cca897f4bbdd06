"""The team's Entra ID group moves from each cluster link (ClusterTeam.group_object_id) to the
team (teams.Team.entra_group_id): one field for sign-in membership and the AKS RoleBinding.

Lives in clusters because clusters depends on teams, never the reverse."""

import uuid

from django.db import migrations, models

# What the way back writes on a link whose team has no group: names nobody in Kubernetes.
NIL_GROUP = uuid.UUID(int=0)


def copy_group_ids(apps, schema_editor):
    """Each team gets the group of its first cluster link (lowest id). A group already taken by
    another team (Team.entra_group_id is unique) is left off the later team, whose admin then
    links one: two teams on one group would share every member."""
    ClusterTeam = apps.get_model("clusters", "ClusterTeam")
    Team = apps.get_model("teams", "Team")
    taken = set(Team.objects.exclude(entra_group_id=None).values_list("entra_group_id", flat=True))
    done = set()
    for link in ClusterTeam.objects.order_by("pk").only("team_id", "group_object_id"):
        if link.team_id in done or link.group_object_id is None:
            continue
        done.add(link.team_id)
        if link.group_object_id in taken:
            continue
        updated = Team.objects.filter(pk=link.team_id, entra_group_id=None).update(
            entra_group_id=link.group_object_id
        )
        if updated:
            taken.add(link.group_object_id)


def copy_back(apps, schema_editor):
    # Reads the two columns it needs: on the way back, teams' later migrations may already be
    # undone, so the historical Team can name columns the table no longer has.
    ClusterTeam = apps.get_model("clusters", "ClusterTeam")
    for pk, group in ClusterTeam.objects.values_list("pk", "team__entra_group_id"):
        ClusterTeam.objects.filter(pk=pk).update(group_object_id=group or NIL_GROUP)


class Migration(migrations.Migration):
    dependencies = [
        ("clusters", "0002_operation_chain"),
        ("teams", "0011_team_entra_group"),
    ]

    operations = [
        migrations.AlterField(
            model_name="clusterteam",
            name="group_object_id",
            field=models.UUIDField(null=True, help_text="Entra ID group object id of the team"),
        ),
        migrations.RunPython(copy_group_ids, copy_back),
        migrations.RemoveField(model_name="clusterteam", name="group_object_id"),
    ]
