"""Printable text at the edge (common.validation): every free-text field of the forms refuses
NUL, other control characters and bidi overrides with a form error, and keeps what people
type: accents, emoji, CJK, and newlines where a field spans lines."""

import pytest
from django.urls import reverse

from common.validation import text_problem
from teams.models import TeamQuotaIncrease


@pytest.mark.parametrize(
    "text, multiline, problem",
    [
        ("Grant ÉRC-2026 for 量子 models 😀", False, None),
        ("first line\nsecond\tline", True, None),
        ("first line\nsecond", False, "U+000A"),
        ("a\x00b", True, "NUL"),
        ("\x1b[2J", True, "U+001B"),
        ("\x85next line", True, "U+0085"),
        ("abc\u202egnp.exe", False, "U+202E"),
        ("\ud800", False, "U+D800"),
    ],
)
def test_text_problem_names_the_offending_character(text, multiline, problem):
    found = text_problem(text, multiline=multiline)
    assert (found is None) if problem is None else (problem in found)


def _increase(client, cast, justification):
    client.force_login(cast.team_admin)
    data = {"gpu_model": "A100", "gpus": "12", "justification": justification}
    return client.post(reverse("team-increase", args=[cast.team.slug]), data)


@pytest.mark.django_db
@pytest.mark.parametrize("justification", ["New\x1b[31m grant", "New grant\u202e", "a\x07b"])
def test_a_justification_with_control_characters_is_a_form_error(client, cast, justification):
    response = _increase(client, cast, justification)
    assert response.status_code == 200
    assert "Use printable text only" in response.content.decode()
    assert not TeamQuotaIncrease.objects.exists()


@pytest.mark.django_db
def test_a_justification_over_several_lines_is_taken(client, cast):
    assert _increase(client, cast, "New grant:\r\n4 more A100 for ÉRC").status_code == 302
    assert TeamQuotaIncrease.objects.get().justification.startswith("New grant:")


@pytest.mark.django_db
def test_a_workspace_name_with_a_control_character_is_a_form_error(client, cast):
    client.force_login(cast.researcher)
    response = client.post(reverse("workspaces:request"), {"name": "llm\x1b", "team": cast.team.pk})
    assert response.status_code == 200
    assert "Use printable text only" in response.content.decode()
