"""The error summary at the top of a form that failed (issue 29: a failed request reloaded at
the top of a 3,200 px form with its errors at the bottom). It lists every error, each linked to
its field by the field's id, as the GOV.UK Design System's error summary does; static/portal.js
focuses it on load and moves focus to a field when its link is followed."""

from dataclasses import dataclass

from django import forms, template

register = template.Library()


@dataclass(frozen=True)
class SummaryLine:
    """One error: ``href`` is "#<id of the field>" ("" for an error of the whole form)."""

    href: str
    label: str
    message: str


def summary_lines(form: forms.BaseForm, anchors: dict[str, str]) -> list[SummaryLine]:
    """The errors of ``form`` in the order of its fields, errors of the whole form first.

    ``anchors`` maps a field's name to the id of what the page renders for it, where that is
    not the field's own ``id_for_label`` (radio buttons drawn in a table: their fieldset)."""
    lines = [SummaryLine("", "", str(message)) for message in form.non_field_errors()]
    for field in form:
        target = anchors.get(field.name) or field.id_for_label
        href = f"#{target}" if target and not field.is_hidden else ""
        label = str(field.label) if not field.is_hidden else ""
        lines += [SummaryLine(href, label, str(message)) for message in field.errors]
    return lines


@register.inclusion_tag("common/_error_summary.html")
def error_summary(form: forms.BaseForm, **anchors: str) -> dict[str, object]:
    """``{% error_summary form offering="size-table" %}``: nothing when the form has no error."""
    return {"lines": summary_lines(form, anchors) if form.is_bound else []}
