"""The store by name: copy, remove (sharing blobs), create from layers, blob upload, lookups."""

from __future__ import annotations

import io
import json

import pytest

from llamay.errors import DigestMismatch, ModelNotFound
from llamay.store import (
    copy,
    create,
    has_blob,
    import_blob,
    list_models,
    model_info,
    pull,
    remove,
    resolve_model,
)
from llamay.store.paths import blobs_dir

from helpers.clitools import run_llamay
from helpers.registry_server import digest_of


@pytest.fixture
def local_model(tmp_path, tiny_gguf):
    source = tmp_path / "tiny.gguf"
    source.write_bytes(tiny_gguf)
    return pull(str(source))


def test_copy_shares_blobs_and_remove_keeps_what_others_use(local_model):
    copy(local_model.name, "mine:1")
    assert [e.name for e in list_models()] == [local_model.name, "mine:1"]
    assert model_info("library/mine:1").path == local_model.path
    remove(local_model.name)
    assert local_model.path.exists()  # mine:1 still uses it
    remove("mine:1")
    assert list_models() == []
    assert not local_model.path.exists()


def test_remove_unknown_and_lookups_of_unknown_names():
    with pytest.raises(ModelNotFound, match="no such model"):
        remove("nothing:1")
    with pytest.raises(ModelNotFound, match=r"llamay pull nothing:1"):
        resolve_model("nothing:1")
    with pytest.raises(ModelNotFound, match="no such file"):
        resolve_model("./missing.gguf")
    with pytest.raises(ModelNotFound):
        copy("nothing:1", "other:1")


def test_create_with_params_template_and_system(local_model):
    entry = create(
        "chatty:1",
        from_=local_model.name,
        params={"stop": ["\n\n"], "temperature": 0.1},
        template="{{ .Prompt }}",
        system="You are terse.",
    )
    assert entry.params == {"stop": ["\n\n"], "temperature": 0.1}
    assert (entry.template, entry.system) == ("{{ .Prompt }}", "You are terse.")
    assert entry.path == local_model.path
    again = create("plain:1", model_digest=digest_of(local_model.path.read_bytes()))
    assert again.params == {} and again.template is None
    with pytest.raises(ModelNotFound, match="upload it first"):
        create("ghost:1", model_digest="sha256:" + "0" * 64)


def test_import_blob_verifies(tiny_gguf):
    digest = digest_of(tiny_gguf)
    assert not has_blob(digest)
    with pytest.raises(DigestMismatch):
        import_blob(digest, io.BytesIO(tiny_gguf[:-1]))
    assert list(blobs_dir().iterdir()) == []
    path = import_blob(digest, io.BytesIO(tiny_gguf))
    assert has_blob(digest) and path.read_bytes() == tiny_gguf
    entry = create("uploaded:1", model_digest=digest, params={"top_k": 5})
    assert json.loads(json.dumps(entry.params)) == {"top_k": 5}


@pytest.mark.slow
def test_the_builtin_name_is_described_before_it_is_pulled():
    entry = model_info("gemma3:270m")
    assert (entry.family, entry.quant, entry.params) == ("gemma3", "Q4_K_M", {})
    assert list_models() == []  # resolving is not pulling


def test_a_model_whose_blob_vanished_is_listed_and_removable(local_model):
    local_model.path.unlink()
    listing = run_llamay("ls")
    assert listing.returncode == 0, listing.stderr
    assert listing.stdout.splitlines()[1].split()[:5] == [local_model.name, "159", "KB", "-", "-"]
    remove(local_model.name)
    assert list_models() == []


def test_removing_a_copy_of_the_builtin_model_keeps_its_file(gemma_path):
    builtin = resolve_model("gemma3:270m")
    copy("gemma3:270m", "mygemma:1")
    assert model_info("mygemma:1").path == builtin
    remove("mygemma:1")
    assert builtin.exists()
    assert resolve_model("gemma3:270m") == builtin


def test_a_name_under_the_home_of_no_such_user_is_not_found():
    with pytest.raises(ModelNotFound, match="no user 'no-such-user-x'"):
        model_info("~no-such-user-x/model.gguf")
