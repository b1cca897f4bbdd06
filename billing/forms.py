"""Forms of the spend pages: which month, which period to export."""

from datetime import date, timedelta
from typing import Any

from django import forms

from common.validation import EARLIEST_DATE, LATEST_DATE, DateInRangeField

MAX_EXPORT_DAYS = 366


class MonthForm(forms.Form):
    """``month`` as YYYY-MM, e.g. 2026-11."""

    month = forms.CharField(max_length=7)

    def clean_month(self) -> date:
        text = self.cleaned_data["month"]
        try:
            year, month = (int(part) for part in text.split("-"))
            first = date(year, month, 1)
        except ValueError:
            raise forms.ValidationError("Give the month as YYYY-MM, e.g. 2026-11.") from None
        if not EARLIEST_DATE <= first <= LATEST_DATE:
            raise forms.ValidationError(
                f"Give a month from {EARLIEST_DATE:%Y-%m} to {LATEST_DATE:%Y-%m}."
            )
        return first


class ExportForm(forms.Form):
    """A period of days to export, both included, at most MAX_EXPORT_DAYS long."""

    start = DateInRangeField(label="From")
    end = DateInRangeField(label="To")

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        start, end = data.get("start"), data.get("end")
        if start and end:
            if end < start:
                raise forms.ValidationError("The period ends before it starts.")
            if end - start >= timedelta(days=MAX_EXPORT_DAYS):
                raise forms.ValidationError(
                    f"Export at most {MAX_EXPORT_DAYS} days at a time; split the period."
                )
        return data
