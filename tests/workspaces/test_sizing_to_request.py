"""From the GPU memory estimate to the request form (issue 29 item 10): a suggested size opens
the form with it chosen and the estimate kept; each size is listed once for the form's region;
LoRA/QLoRA is told what activation checkpointing saves; full fine-tuning that nothing holds is
pointed to LoRA/QLoRA or several GPU VMs."""

import re
from html import unescape

import pytest
from django.urls import reverse
from django.utils.html import strip_tags

from tests.clusters.test_aks_workspaces import cluster, make_pool  # noqa: F401
from tests.clusters.test_sizing_view import catalog  # noqa: F401

pytestmark = pytest.mark.django_db
PARTIAL = {"HTTP_HX_REQUEST": "true"}


def _text(html: str) -> str:
    return " ".join(unescape(strip_tags(html)).split())


def _panel(client, query: str) -> str:
    return client.get("/sizing/estimate?" + query, **PARTIAL).content.decode()


def test_the_request_forms_estimate_lists_each_size_once_for_its_region(client, cast, catalog):  # noqa: F811
    client.force_login(cast.researcher)
    html = _panel(client, "parameters_b=7&precision=fp16&workload=inference&region=eastus")
    names = re.findall(r"<code>(Standard_[^<]+)</code>", html)
    assert names and len(names) == len(set(names))  # once each, not once per region
    assert "westeurope" not in html
    # The panel on the request form sends the form's region with its inputs.
    client.force_login(cast.researcher)
    form = client.get(reverse("workspaces:request")).content.decode()
    estimate_form = re.search(r'<form method="get"[^>]*id="estimate-form"[^>]*>', form)[0]
    assert 'hx-include="[name=team],[name=region]"' in estimate_form


def test_a_suggested_size_opens_the_request_form_with_it_chosen_and_the_estimate(
    client,
    cast,
    catalog,  # noqa: F811
):
    client.force_login(cast.researcher)
    html = _panel(client, "parameters_b=7&precision=fp16&workload=inference&region=eastus")
    link = unescape(re.search(r'<a href="([^"]+)"><code>Standard_NV36ads_A10_v5</code>', html)[1])
    assert link.startswith(reverse("workspaces:request") + "?")
    assert "size=Standard_NV36ads_A10_v5" in link and "parameters_b=7" in link

    form = client.get(link).content.decode()
    a10 = re.search(
        r'<input type="radio" name="offering" value="(\d+)" id="offering-\1"\s*checked', form
    )
    assert a10 is not None  # the A10 is chosen
    assert 'id="offering-' + a10[1] + '"' in form
    label = re.search(r'<label for="offering-' + a10[1] + r'"><code>([^<]+)</code>', form)[1]
    assert label == "Standard_NV36ads_A10_v5"
    # The estimate it came from is open above the form, its inputs as they were.
    assert re.search(r'<details class="card mb-3 estimate-panel" id="estimate-panel" open>', form)
    assert "16.15 GiB" in _text(form)
    assert 'name="parameters_b" value="7"' in form


def test_lora_is_told_what_activation_checkpointing_saves(client, cast, catalog):  # noqa: F811
    client.force_login(cast.researcher)
    # The case: 70B QLoRA came to 128.9 GiB, 85 of it activations.
    query = "preset=llama-3-70b&precision=int4&workload=lora"
    text = _text(_panel(client, query))
    assert "128.90 GiB of GPU memory" in text
    assert "from 85.00 to 5.00 GiB: 48.90 GiB in all, 80.00 GiB less" in text
    found = re.search(
        r"Activation checkpointing would cut the activations from ([\d.]+) to ([\d.]+) GiB: "
        r"([\d.]+) GiB in all, ([\d.]+) GiB less",
        text,
    )
    assert found, text
    now, with_it, total, saved = (float(g) for g in found.groups())
    assert with_it < now and saved == pytest.approx(now - with_it, abs=0.02)
    # Already on: nothing to offer.
    assert "would cut" not in _text(_panel(client, query + "&checkpointing=on"))


def test_full_finetuning_nothing_holds_points_to_lora_or_several_gpus(client, cast, catalog):  # noqa: F811
    client.force_login(cast.researcher)
    text = _text(_panel(client, "preset=llama-3-70b&precision=bf16&workload=full_finetune"))
    assert "No offered size or MIG profile holds it" in text
    assert "LoRA / QLoRA" in text and "several GPU VMs" in text


@pytest.mark.django_db(transaction=True)
def test_a_suggested_mig_profile_opens_the_mig_form_with_it_chosen(client, cast, cluster):  # noqa: F811
    make_pool(cast, cluster)
    client.force_login(cast.researcher)
    url = reverse("workspaces:request-mig") + "?region=eastus&profile=A100%7C1g.10gb"
    page = client.get(url).content.decode()
    assert re.search(r'value="A100\|1g\.10gb" checked', page)
