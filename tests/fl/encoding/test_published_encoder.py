"""The integrity of a published encoder folder (``fl.encoding.published.folder_digest``, ``check_published``):
its digest covers every file a node loads, and a node refuses a folder whose files are not its digest's,
on every path that reads it (the node's request handler, the loader on any device, the embedding-cache
identity, the dimension).

No tuning here: the packaged MiniLM is published as it is (about a second), then each test alters a copy.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from fl import config as config_mod
from fl import wire
from fl.encoding import encoder as enc
from fl.encoding.public_tuning import TunedEncoder, publish, published_encoder

#: Every file a saved sentence-transformers MiniLM folder holds (the manifest aside): what a node loads.
FILES = (
    "1_Pooling/config.json",
    "2_Normalize/config.json",
    "config.json",
    "config_sentence_transformers.json",
    "model.safetensors",
    "modules.json",
    "sentence_bert_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
)


@pytest.fixture(scope="module")
def original(tmp_path_factory: pytest.TempPathFactory) -> TunedEncoder:
    """The packaged MiniLM, published as it is (its digest is that of its saved folder)."""
    root = tmp_path_factory.mktemp("published") / "encoders"
    model = enc.load_encoder(enc.DEFAULT_ENCODER, "cpu")
    return publish(model, root, enc.DEFAULT_ENCODER, {"note": "untuned, for the integrity tests"})


@pytest.fixture
def published(original: TunedEncoder, tmp_path: Path) -> TunedEncoder:
    """A copy of the published folder under this test's ``<cache-dir>/encoders``, free to alter."""
    folder = tmp_path / "cache" / "encoders" / original.digest
    shutil.copytree(original.folder, folder)
    return TunedEncoder(original.digest, folder, original.info)


class _Loaded:
    """Stands in for a loaded SentenceTransformer: what ``load_encoder`` does with it (eval, frozen parameters)."""

    def eval(self) -> _Loaded:
        return self

    def parameters(self) -> list[Any]:
        return []


def _flip_byte(path: Path, at: float = 0.5) -> None:
    """Change one byte of ``path`` in place (at the relative position ``at``), keeping its length; a second
    call with the same ``at`` restores it."""
    with open(path, "r+b") as fh:
        fh.seek(min(path.stat().st_size - 1, int(at * path.stat().st_size)))
        byte = fh.read(1)
        fh.seek(-1, 1)
        fh.write(bytes([byte[0] ^ 0x01]))


def test_the_published_folder_holds_the_files_a_node_loads(published: TunedEncoder) -> None:
    """The list the other tests alter is the whole folder: a file the digest left out would go unnoticed."""
    listed = [rel for rel, _ in enc.folder_files(published.folder)]
    assert listed == sorted(FILES)
    manifest = json.loads((published.folder / enc.MANIFEST).read_text())
    assert manifest["digest"] == published.digest and sorted(manifest["files"]) == sorted(FILES)
    assert enc.folder_digest(published.folder)[0] == published.digest


def test_one_byte_of_any_file_changes_the_digest_and_is_refused(published: TunedEncoder) -> None:
    """One byte of the tokenizer, the pooling configuration, modules.json, the weights...: another digest,
    refused with a message naming the expected and the found digest and the file; the byte restored: accepted
    (the files are hashed again whenever they change on disk)."""
    root, digest = published.folder.parent, published.digest
    assert published_encoder(root, digest) == str(published.folder)
    for name in FILES:
        _flip_byte(published.folder / name)
        with pytest.raises(ValueError, match=f"expected {digest}, found (?!{digest})[0-9a-f]{{64}} .*{name}"):
            published_encoder(root, digest)
        _flip_byte(published.folder / name)
        assert published_encoder(root, digest) == str(published.folder), name


def test_an_added_removed_or_renamed_file_changes_the_digest(published: TunedEncoder) -> None:
    folder, digest = published.folder, published.digest
    (folder / "extra.txt").write_text("a file the loader might read")
    assert enc.folder_digest(folder)[0] != digest
    (folder / "extra.txt").unlink()
    assert enc.folder_digest(folder)[0] == digest
    (folder / "tokenizer.json").rename(folder / "tokenizer2.json")  # same bytes, another name
    assert enc.folder_digest(folder)[0] != digest
    (folder / "tokenizer2.json").rename(folder / "tokenizer.json")
    (folder / "1_Pooling" / "config.json").unlink()
    with pytest.raises(ValueError, match=f"expected {digest}"):
        published_encoder(folder.parent, digest)


def test_a_symbolic_link_or_a_wrong_manifest_is_refused(published: TunedEncoder, tmp_path: Path) -> None:
    folder, digest = published.folder, published.digest
    # the manifest is the one file the digest leaves out, but it must name the folder's digest
    manifest = json.loads((folder / enc.MANIFEST).read_text())
    (folder / enc.MANIFEST).write_text(json.dumps({**manifest, "digest": "f" * 64}))
    with pytest.raises(ValueError, match="names 'f{64}'"):
        published_encoder(folder.parent, digest)
    (folder / enc.MANIFEST).write_text(json.dumps(manifest))
    assert published_encoder(folder.parent, digest) == str(folder)
    # a link: its target could change while the folder does not
    outside = tmp_path / "vocab-elsewhere.json"
    shutil.move(folder / "tokenizer.json", outside)
    (folder / "tokenizer.json").symlink_to(outside)
    with pytest.raises(ValueError, match="symbolic link"):
        published_encoder(folder.parent, digest)


def _node_config(cache: Path) -> config_mod.RunConfig:
    return config_mod.resolve({"encoder-tuning": "public", "public-fraction": 0.4, "cache-dir": str(cache)})


def _request(digest: str) -> Any:
    """A request as the server's EncoderGrid stamps it (only its content is read; a Flower Message needs a run)."""
    from flwr.app import ConfigRecord, RecordDict

    return SimpleNamespace(content=RecordDict({wire.ENCODER: ConfigRecord({"digest": digest})}))


def test_a_node_refuses_a_folder_whose_tokenizer_changed(published: TunedEncoder) -> None:
    """The node's request handler (clients.node.with_published_encoder) serves with the folder the request
    names by digest; one byte of the tokenizer changed on the node's disk: the request is refused."""
    from clients.node import with_published_encoder

    cfg = _node_config(published.folder.parents[1])
    served = with_published_encoder(cfg, _request(published.digest))
    assert served.encoder.encoder == str(published.folder)
    _flip_byte(published.folder / "tokenizer.json")
    with pytest.raises(ValueError, match=f"expected {published.digest}, found [0-9a-f]{{64}} .*tokenizer.json"):
        with_published_encoder(cfg, _request(published.digest))
    with pytest.raises(ValueError, match="not published"):
        with_published_encoder(cfg, _request("1" * 64))


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_the_loader_checks_the_files_then_loads_that_folder_only(
    published: TunedEncoder, device: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On any device, the files on disk are hashed before loading and the model is loaded from that very
    folder (its absolute path, no hub or other cache); an altered folder never reaches the loader."""
    import sentence_transformers

    calls: list[tuple[str, dict[str, Any]]] = []

    class Recorder(_Loaded):
        def __init__(self, path: str, **kwargs: Any) -> None:
            super().__init__()
            calls.append((path, kwargs))

    monkeypatch.setattr(sentence_transformers, "SentenceTransformer", Recorder)
    name = str(published.folder)
    enc.load_encoder.cache_clear()
    enc.load_encoder(name, device)
    assert calls == [(str(published.folder.resolve()), {"device": device, "local_files_only": True})]
    enc.load_encoder.cache_clear()
    config = published.folder / "1_Pooling" / "config.json"
    config.write_text(config.read_text().replace('"mean"', '"max"'))  # another pooling
    with pytest.raises(ValueError, match=f"expected {published.digest}.*1_Pooling/config.json"):
        enc.load_encoder(name, device)
    assert len(calls) == 1  # refused before loading
    enc.load_encoder.cache_clear()


def test_a_file_changed_while_loading_is_refused(published: TunedEncoder, monkeypatch: pytest.MonkeyPatch) -> None:
    """The files checked are the files loaded: a write during the load (after the hash) is caught."""
    import sentence_transformers

    class Racer(_Loaded):
        def __init__(self, path: str, **kwargs: Any) -> None:
            super().__init__()
            _flip_byte(Path(path) / "tokenizer_config.json")

    monkeypatch.setattr(sentence_transformers, "SentenceTransformer", Racer)
    enc.load_encoder.cache_clear()
    with pytest.raises(ValueError, match="changed while it was loaded"):
        enc.load_encoder(str(published.folder), "cpu")
    enc.load_encoder.cache_clear()


def test_the_real_loader_refuses_an_altered_tokenizer(published: TunedEncoder) -> None:
    """The real sentence-transformers load of the published folder: accepted as published, the same
    encoder as the base; refused once tokenizer_config.json is edited, and so are its cache identity and
    its dimension (a run whose embeddings are all cached never loads the model)."""
    name = str(published.folder)
    for fn in (enc.load_encoder, enc.model_id, enc.encoder_dimension):
        fn.cache_clear()
    model = enc.load_encoder(name, "cpu")
    assert enc.embedding_dim(model) == 384 and model.max_seq_length == 256
    assert enc.model_id(name) == f"sanitas-encoder|{published.digest}"
    for fn in (enc.load_encoder, enc.model_id, enc.encoder_dimension):
        fn.cache_clear()
    path = published.folder / "tokenizer_config.json"
    path.write_text(path.read_text().replace('"model_max_length": 256', '"model_max_length": 8'))
    readers = (lambda: enc.load_encoder(name, "cpu"), lambda: enc.model_id(name), lambda: enc.encoder_dimension(name))
    for read in readers:
        with pytest.raises(ValueError, match=f"expected {published.digest}, found .*tokenizer_config.json"):
            read()
    for fn in (enc.load_encoder, enc.model_id, enc.encoder_dimension):
        fn.cache_clear()


def test_the_packaged_encoder_is_loaded_as_before() -> None:
    """No tuning: the packaged MiniLM is no published folder, so no digest is asked of it."""
    path = Path(enc.resolve_model(enc.DEFAULT_ENCODER))
    assert enc.published_digest(path) is None
    assert enc.model_id(enc.DEFAULT_ENCODER).startswith(f"{enc.DEFAULT_ENCODER}|model.safetensors:")
