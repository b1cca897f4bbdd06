"""Forms of the team storage page: they parse and validate input; storage.services applies it
(and checks the rules again)."""

from django import forms

from storage.models import Access
from storage.services import MAX_SHARE_GIB, MIN_SHARE_GIB


class ShareForm(forms.Form):
    name = forms.SlugField(
        max_length=32,
        help_text="Lower-case letters, digits and hyphens; mounted at /data/<name>",
    )
    size_gib = forms.IntegerField(
        label="Size (GiB)",
        min_value=MIN_SHARE_GIB,
        max_value=MAX_SHARE_GIB,
        initial=1024,
        help_text="Provisioned, and billed, whether used or not",
    )
    researcher_access = forms.ChoiceField(
        label="Researchers mount it", choices=Access.choices, initial=Access.READ_WRITE
    )


class DeleteShareForm(forms.Form):
    confirm = forms.CharField(max_length=40, label="Type the share's name to delete it")


class QuotaForm(forms.Form):
    quota_gib = forms.IntegerField(label="Storage quota (GiB)", min_value=0, max_value=10**7)
