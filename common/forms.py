"""Bootstrap 5 classes on every form field the portal renders, set once here (Django 5.2's
renderer-wide ``bound_field_class``) rather than in each form or template."""

from typing import Any

from django import forms
from django.forms.boundfield import BoundField
from django.forms.renderers import DjangoTemplates


def bootstrap_class(widget: forms.Widget) -> str:
    """The Bootstrap class of a widget: form-select, form-check-input or form-control ('' for
    hidden inputs and widgets that render several inputs)."""
    if widget.is_hidden:
        return ""
    if isinstance(widget, forms.Select | forms.SelectMultiple) and not isinstance(
        widget, forms.RadioSelect | forms.CheckboxSelectMultiple
    ):
        return "form-select"
    if isinstance(widget, forms.CheckboxInput):
        return "form-check-input"
    if isinstance(widget, forms.RadioSelect | forms.CheckboxSelectMultiple | forms.MultiWidget):
        return ""
    return "form-control"


class BootstrapBoundField(BoundField):
    """Adds the widget's Bootstrap class, and ``is-invalid`` when the field has errors (which
    shows its ``invalid-feedback`` message), to what the widget already carries."""

    def build_widget_attrs(
        self, attrs: dict[str, Any], widget: forms.Widget | None = None
    ) -> dict[str, Any]:
        attrs = super().build_widget_attrs(attrs, widget)
        widget = widget or self.field.widget
        wanted = bootstrap_class(widget)
        if wanted and not widget.is_hidden and self.errors:
            wanted += " is-invalid"
        if wanted:
            given = attrs.get("class") or widget.attrs.get("class", "")
            attrs["class"] = f"{given} {wanted}".strip()
        return attrs


class BootstrapFormRenderer(DjangoTemplates):
    """FORM_RENDERER of the portal (portal/settings.py)."""

    bound_field_class = BootstrapBoundField
