"""`gpuportal schedule --weekdays`: day names, numbers and ranges read as Monday 0 .. Sunday
6, and what it cannot read refused naming it (no portal, no database)."""

import pytest
import typer
from gpuportal.schedule_cmds import weekdays


@pytest.mark.parametrize(
    ("text", "days"),
    [
        ("mon-fri", [0, 1, 2, 3, 4]),
        ("sat,sun", [5, 6]),
        ("0-4", [0, 1, 2, 3, 4]),
        ("Mon,wed-fri", [0, 2, 3, 4]),
        ("friday", [4]),
        ("sun,mon,sun", [0, 6]),
    ],
)
def test_days_ranges_and_numbers(text, days):
    assert weekdays(text) == days


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("fri-mon", "runs backwards"),
        ("mo", "no weekday 'mo'"),
        ("7", "no weekday '7'"),
        ("", "no weekday ''"),
    ],
)
def test_what_it_cannot_read_is_refused_naming_it(text, said):
    with pytest.raises(typer.BadParameter, match=said):
        weekdays(text)
