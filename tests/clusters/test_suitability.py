"""Size labels: what each size and MIG profile suits (one rule, workspaces.suitability), shown
with its GPU memory on the request forms, which filter sizes on it."""

import io
import re

import pytest
from django.core.management import call_command
from django.urls import reverse

from clusters.selectors import MigChoice
from tests.clusters.test_aks_workspaces import cluster, make_pool  # noqa: F401
from workspaces.suitability import Suits, accepts, mig_profile_suits, size_suits


@pytest.mark.parametrize(
    "vm_size,memory,suits",
    [
        ("Standard_ND96asr_v4", 40, Suits.TRAINING),
        ("Standard_ND96amsr_A100_v4", 80, Suits.TRAINING),
        ("Standard_ND96isr_H100_v5", 80, Suits.TRAINING),
        ("Standard_NC24ads_A100_v4", 80, Suits.BOTH),
        ("Standard_NC96ads_A100_v4", 80, Suits.BOTH),
        ("Standard_NC40ads_H100_v5", 94, Suits.BOTH),
        ("Standard_NC80adis_H100_v5", 94, Suits.BOTH),
        ("Standard_NC8ads_A10_v4", 24, Suits.BOTH),
        ("Standard_NC4as_T4_v3", 16, Suits.INFERENCE),
        ("Standard_NC64as_T4_v3", 16, Suits.INFERENCE),
        ("Standard_NV36ads_A10_v5", 24, Suits.INFERENCE),
        ("Standard_NV72ads_A10_v5", 24, Suits.INFERENCE),
        ("Standard_NV6ads_A10_v5", 4, Suits.INFERENCE),
        ("Standard_NV18ads_A10_v5", 12, Suits.INFERENCE),
        # No rule names them: GPU memory decides.
        ("Standard_NC_Unknown_v9", 80, Suits.BOTH),
        ("Standard_NC_Unknown_v9", 16, Suits.INFERENCE),
    ],
)
def test_what_a_size_suits(vm_size, memory, suits):
    assert size_suits(vm_size, memory) == suits


@pytest.mark.parametrize(
    "profile,suits",
    [
        ("1g.10gb", Suits.INFERENCE),
        ("2g.20gb", Suits.INFERENCE),
        ("1g.5gb", Suits.INFERENCE),
        ("3g.40gb", Suits.BOTH),
        ("4g.40gb", Suits.BOTH),
        ("7g.80gb", Suits.BOTH),
        ("3g.47gb", Suits.BOTH),
        ("2g.24gb", Suits.INFERENCE),
    ],
)
def test_what_a_mig_profile_suits(profile, suits):
    assert mig_profile_suits(profile) == suits


@pytest.mark.parametrize("bad", ["", "1g", "8g.80gb", "1g.10gb\x00", "A100"])
def test_a_string_that_is_no_mig_profile_is_refused(bad):
    with pytest.raises(ValueError, match="not a MIG profile"):
        mig_profile_suits(bad)


def test_a_filter_for_training_also_finds_sizes_for_both():
    assert accepts("training", Suits.BOTH) and accepts("inference", Suits.BOTH)
    assert not accepts("training", Suits.INFERENCE) and not accepts("both", Suits.TRAINING)
    assert accepts("", Suits.TRAINING) and accepts("junk", Suits.INFERENCE)


def test_labels_read_as_words():
    assert [s.label for s in Suits] == ["Training", "Inference", "Training and inference"]


def test_a_mig_choice_says_what_it_suits_and_its_memory():
    choice = MigChoice("3g.40gb", "A100", 3, None, 2, 2, None)
    assert (choice.suits, choice.memory_gib) == (Suits.BOTH, 40)


@pytest.fixture
def catalog(db):
    call_command("load_catalog", stdout=io.StringIO())


def _rows(page: str) -> dict[str, str]:
    """vm_size -> its row's HTML, from the size table."""
    rows = re.findall(r"<tr>\s*<td><input[^>]*>.*?</tr>", page, re.S)
    return {re.search(r"<code>(\w+)</code>", r).group(1): r for r in rows}


def _size_table(client, cast, **params):
    client.force_login(cast.researcher)
    response = client.get(
        reverse("workspaces:request"), {"region": "eastus", **params}, HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 200
    return _rows(response.content.decode())


def test_the_size_table_shows_labels_and_memory_per_gpu_and_in_total(client, cast, catalog):
    rows = _size_table(client, cast)
    nv6, nv12, nv18 = (
        rows[f"Standard_NV{n}ads_A10_v5"] for n in (6, 12, 18)
    )  # fmt: skip
    assert "1/6 A10" in nv6 and "1/3 A10" in nv12 and "1/2 A10" in nv18
    for row, gib in ((nv6, 4), (nv12, 8), (nv18, 12)):
        assert re.search(rf">{gib} GB</td>\s*<td[^>]*>{gib} GB</td>", row)
        assert 'data-suits="inference"' in row and ">Inference<" in row
    nc96 = rows["Standard_NC96ads_A100_v4"]
    assert "4 × A100" in nc96 and "80 GB each" in nc96 and ">320 GB<" in nc96
    assert ">Training and inference<" in nc96
    assert ">Training<" in rows["Standard_ND96amsr_A100_v4"]


@pytest.mark.parametrize(
    "wanted,labels",
    [
        ("training", {"training", "both"}),
        ("inference", {"inference", "both"}),
        ("both", {"both"}),
    ],
)
def test_the_request_form_filters_sizes_on_what_they_suit(client, cast, catalog, wanted, labels):
    everything = _size_table(client, cast)
    rows = _size_table(client, cast, suits=wanted)
    assert rows and set(rows) < set(everything)
    found = {re.search(r'data-suits="(\w+)"', r).group(1) for r in rows.values()}
    assert found == labels
    # Every size of a matching label is listed, not only some.
    assert set(rows) == {
        s for s, r in everything.items() if re.search(r'data-suits="(\w+)"', r).group(1) in labels
    }


def test_a_bad_filter_value_lists_every_size(client, cast, catalog):
    assert _size_table(client, cast, suits="gpu\x00") == _size_table(client, cast)


def test_the_full_page_keeps_the_filter_chosen(client, cast, catalog):
    client.force_login(cast.researcher)
    page = client.get(reverse("workspaces:request"), {"suits": "training"}).content.decode()
    assert '<option value="training" selected>Training</option>' in page
    assert "Standard_NV6ads_A10_v5" not in page and "Standard_ND96amsr_A100_v4" in page


@pytest.mark.django_db(transaction=True)
def test_the_mig_form_shows_what_each_profile_suits(client, cast, cluster):  # noqa: F811
    make_pool(cast, cluster)
    client.force_login(cast.researcher)
    page = client.get(reverse("workspaces:request-mig")).content.decode()
    assert 'data-suits="inference">Inference<' in page
    assert "10 GB of the GPU&#x27;s 80 GB" in page or "10 GB of the GPU's 80 GB" in page
