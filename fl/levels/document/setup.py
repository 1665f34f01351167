"""Sentence-level DP for whole documents in a run: the public setup, the release, the k breakdown.

With ``document-mechanism`` set, a user's document is its k sentence
embeddings G(s_1..s_k) (k >= 2; shorter documents are dropped or refused by
``short-documents``), and the user releases one sanitized document embedding:

* ``deepcandidate`` (Meehan et al. 2022): the server builds, from public
  documents only, the recoder H, the candidate pool F and the number of
  projections p (``fl.levels.document.recoder``), and sends them to each node once. A node
  recodes its users' sentences with H and sends only the index of the chosen
  candidate; the server looks up F[index]. Pure epsilon-SentDP per sentence,
  epsilon * k / 2 per whole document, k revealed.
* ``truncation`` (Li & Clifton 2021 as in Meehan et al.): the server computes
  the 75% median box of the public documents' mean-G embeddings and sends it;
  a node releases the clipped mean + Laplace noise. Pure epsilon-SentDP per
  sentence, k * epsilon per whole document.

:class:`DocumentSetup` is that public material and its wire format.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from flwr.app import Array, ArrayRecord

import mechanisms
from fl.config import ReleaseConfig, mechanism_options
from fl.data import datasets as data
from fl.encoding.cache_files import atomic_write, discarded, seal, unseal
from fl.encoding.documents import SentenceDocs, embed_sentences
from fl.levels.document.recoder import (
    PROJECTION_GRID,
    Recoder,
    recode,
    select_candidates,
    train_recoder,
    tune_projections,
)
from fl.levels.spec import LevelSpec
from fl.maps.pipeline import confusion_matrix
from mechanisms.base import DocumentMechanism

log = logging.getLogger(__name__)

# Buckets of the number of sentences k for the k breakdown (Meehan et al. Fig. 4): [2, 4), [4, 6), ..., [50, inf).
# Bucket starts of the scores by k. SentDP runs have k >= 2; k = 1 is for the non-private and
# word-level runs of the same task, which keep one-sentence documents.
K_EDGES: tuple[int, ...] = (1, 2, 4, 6, 8, 10, 15, 20, 30, 50)


@dataclass
class DocumentSetup:
    """Public material of a document-level run, built by the server from public documents."""

    kind: str  # "deepcandidate" or "truncation"
    epsilon: float
    recoder: Recoder | None = None  # deepcandidate: H
    candidates: torch.Tensor | None = None  # deepcandidate: F, float32 [m, d]
    num_projections: int = 0  # deepcandidate: p
    projection_seed: int = 0
    lo: torch.Tensor | None = None  # truncation: the box
    hi: torch.Tensor | None = None
    info: dict[str, Any] = field(default_factory=dict)  # how it was built (server side only)
    _version: str | None = field(default=None, init=False, repr=False, compare=False)

    def to_record(self) -> ArrayRecord:
        """The wire format sent to nodes (tensors only; ``info`` stays on the server)."""
        arrays: dict[str, Array] = {
            "meta": Array(np.array([self.num_projections, self.projection_seed], dtype=np.int64)),
        }
        if self.recoder is not None:
            for k, v in self.recoder.state_dict().items():
                arrays[f"recoder.{k}"] = Array(v.detach().cpu().numpy())
        for name in ("candidates", "lo", "hi"):
            value = getattr(self, name)
            if value is not None:
                arrays[name] = Array(value.detach().cpu().numpy())
        return ArrayRecord(arrays)

    @classmethod
    def from_record(cls, record: ArrayRecord, release: ReleaseConfig) -> DocumentSetup:
        meta = record["meta"].numpy()
        tensors = {k: torch.as_tensor(v.numpy()) for k, v in record.items() if k != "meta"}
        recoder = None
        state = {k[len("recoder.") :]: v for k, v in tensors.items() if k.startswith("recoder.")}
        if state:
            recoder = Recoder(int(state["net.0.weight"].shape[1]))
            recoder.load_state_dict(state)
            recoder.eval()
        return cls(
            release.document_mechanism,
            float(release.document_epsilon),
            recoder,
            tensors.get("candidates"),
            int(meta[0]),
            int(meta[1]),
            tensors.get("lo"),
            tensors.get("hi"),
        )

    def version(self) -> str:
        """A fingerprint of the public material (nodes cache their mechanism by it).

        Hashed once (megabytes of weights and candidates): a setup is complete
        when built and is not modified afterwards.
        """
        if self._version is None:
            h = hashlib.sha256(f"{self.kind}|{self.epsilon}|{self.num_projections}|{self.projection_seed}".encode())
            for value in (self.candidates, self.lo, self.hi):
                if value is not None:
                    h.update(value.detach().cpu().to(torch.float32).numpy().tobytes())
            if self.recoder is not None:
                for v in self.recoder.state_dict().values():
                    h.update(v.detach().cpu().numpy().tobytes())
            self._version = h.hexdigest()[:16]
        return self._version

    def mechanism(self, release: ReleaseConfig) -> DocumentMechanism:
        """The document mechanism this setup defines (cached per process by version)."""
        return _mechanism(self.version(), self, release.document_options)

    def recode(self, docs: SentenceDocs) -> torch.Tensor:
        """The sentence rows the mechanism sees: H(G(s)) for deepcandidate, G(s) for truncation."""
        return recode(self.recoder, docs.emb) if self.recoder is not None else docs.emb

    def clean(self, docs: SentenceDocs) -> torch.Tensor:
        """Noise-free document embeddings in the release space (mean of the mechanism's sentence rows).

        A diagnostic only (the model on clean inputs), never released.
        """
        return docs.means(self.recode(docs))

    def release(
        self, release: ReleaseConfig, docs: SentenceDocs, generator: torch.Generator
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """One release per document under ``release``'s document mechanism: (embedding [n, d] float32,
        candidate ids or ``None``)."""
        mech = self.mechanism(release)
        blocks = docs.docs(emb=self.recode(docs))
        out = mech.sanitize(blocks, generator=generator)
        if self.kind == "deepcandidate":
            assert self.candidates is not None
            return self.candidates[out].to(torch.float32), out.to(torch.int64)
        return out.to(torch.float32), None


_MECHANISMS: dict[str, DocumentMechanism] = {}


def _mechanism(version: str, setup: DocumentSetup, options_text: str) -> DocumentMechanism:
    key = f"{version}|{options_text}"
    if key not in _MECHANISMS:
        options = mechanism_options(options_text, "document-options")
        if setup.kind == "deepcandidate":
            assert setup.candidates is not None
            mech = mechanisms.create(
                "deepcandidate",
                epsilon=setup.epsilon,
                candidates=setup.candidates.to(torch.float64),
                num_projections=setup.num_projections,
                projection_seed=setup.projection_seed,
                **options,
            )
        else:
            assert setup.lo is not None and setup.hi is not None
            mech = mechanisms.create(
                "truncation",
                epsilon=setup.epsilon,
                lo=setup.lo.to(torch.float64),
                hi=setup.hi.to(torch.float64),
                **options,
            )
        if not isinstance(mech, DocumentMechanism):  # the registry returns a Mechanism; both are document ones
            raise TypeError(f"{setup.kind} is not a document mechanism: {type(mech).__name__}")
        _MECHANISMS[key] = mech
    return _MECHANISMS[key]


def build_setup(spec: LevelSpec, device: str | torch.device = "cpu", progress: bool = True) -> DocumentSetup:
    """Build the public material from the public split (server side), training on ``device``; the public
    sentences are embedded on ``spec.device``. Public data only."""
    ds = data.load(spec.data, spec.users, spec.level)
    if ds.public is None or len(ds.public) == 0:
        raise ValueError(
            "the document level needs public documents: set public-size > 0, public-fraction > 0 or public-dataset"
        )
    public = embed_sentences(ds.public["text"][:], spec.encoder, spec.device, progress)
    labels = torch.as_tensor(np.asarray(ds.public["label"][:], dtype=np.int64))
    usable = np.flatnonzero(public.num_sentences >= 2)  # as for private documents
    public, labels = public.select(usable), labels[usable]
    release = spec.release
    kind, eps, seed = release.document_mechanism, float(release.document_epsilon), int(spec.users.seed)
    if kind == "truncation":
        from mechanisms.truncation import median_box

        lo, hi = median_box(public.means().to(torch.float64))
        info: dict[str, Any] = {"public_documents": len(public), "box_mean_width": float((hi - lo).mean())}
        return DocumentSetup(kind, eps, lo=lo.to(torch.float32), hi=hi.to(torch.float32), info=info)
    if kind != "deepcandidate":
        raise ValueError(f"unknown document mechanism {kind!r}")
    recoder, classifier, val, chosen, candidates, recoder_info = _public_recoder(
        spec, public, labels, ds.num_classes, device, progress
    )
    info = {"recoder": recoder_info, "candidates": int(len(chosen))}
    num_projections = int(release.num_projections)
    if num_projections == 0:  # tune p on the public validation documents (no privacy cost)
        val_docs = public.select(val)
        blocks = val_docs.docs(emb=recode(recoder, val_docs.emb))

        def make(p: int) -> DocumentMechanism:
            return DocumentSetup(kind, eps, recoder, candidates, p, seed).mechanism(release)

        num_projections, scores = tune_projections(
            make, candidates, classifier, blocks, labels[val].numpy(), ds.num_classes, PROJECTION_GRID, seed
        )
        info["projection_tuning"] = {
            "grid": list(PROJECTION_GRID),
            "validation_macro_f1": scores,
            "chosen": num_projections,
        }
    return DocumentSetup(kind, eps, recoder, candidates, num_projections, seed, info=info)


def _public_recoder(
    spec: LevelSpec,
    public: SentenceDocs,
    labels: torch.Tensor,
    num_classes: int,
    device: str | torch.device,
    progress: bool,
) -> tuple[Recoder, torch.nn.Module, np.ndarray, np.ndarray, torch.Tensor, dict[str, Any]]:
    """H, C_dc, the validation rows, the candidates' rows and F: trained once per public data and
    settings, then read back from ``<cache-dir>/document-setup/`` (a function of public data only,
    shared by every epsilon of a sweep)."""
    release = spec.release
    material = json.dumps(
        {
            "v": 2,
            "data": spec.data.flat(),  # the public documents (with the seed and the level below)
            "seed": spec.users.seed,
            "level": release.level,
            "folder": str(spec.data.folder),
            "encoder": spec.encoder.encoder,
            "recoder": [release.recoder_clusters, release.recoder_epochs],
            "candidates": [release.num_candidates, release.candidate_min_sentences],
        },
        sort_keys=True,
        default=str,
    )
    path = spec.encoder.cache_folder / "document-setup" / f"{hashlib.sha256(material.encode()).hexdigest()[:32]}.pt"
    d, seed = public.dim, int(spec.users.seed)
    if path.is_file():
        cached = _read_setup(path, d, num_classes)
        if cached is not None:
            log.info("document level: recoder and candidates read from %s", path)
            return cached
    training = train_recoder(
        public,
        labels,
        num_classes,
        clusters=int(release.recoder_clusters),
        epochs=int(release.recoder_epochs),
        seed=seed,
        device=device,
        progress=progress,
    )
    recoder, classifier = training.recoder.cpu().eval(), training.classifier.cpu().eval()
    recoded = recode(recoder, public.emb)
    val = np.asarray(training.info.pop("validation_rows"), dtype=np.int64)
    chosen, candidates = select_candidates(
        public, recoded, int(release.candidate_min_sentences), int(release.num_candidates), seed, exclude=val
    )
    entry = seal(
        {
            "recoder": recoder.state_dict(),
            "classifier": classifier.state_dict(),
            "val": torch.as_tensor(val),
            "chosen": torch.as_tensor(chosen),
            "candidates": candidates,
            "info": json.dumps(training.info),
        }
    )
    atomic_write(path, lambda fh: torch.save(entry, fh))
    return recoder, classifier, val, chosen, candidates, training.info


def _read_setup(
    path: Path, d: int, num_classes: int
) -> tuple[Recoder, torch.nn.Module, np.ndarray, np.ndarray, torch.Tensor, dict[str, Any]] | None:
    """The cached public setup at ``path`` (as :func:`_public_recoder` returns it), or ``None`` (with a
    warning) when it must be rebuilt: unreadable, checksum mismatch (:func:`fl.encoding.cache_files.unseal`),
    weights that do not fit the models, or candidates and rows of the wrong shape or not finite."""
    try:
        saved = torch.load(path, weights_only=True)
        opened = unseal(saved, path)
        if opened is None:
            return None
        entry = opened[0]
        recoder = Recoder(d)
        recoder.load_state_dict(entry["recoder"])
        classifier = torch.nn.Sequential(
            torch.nn.Linear(d, 256), torch.nn.ReLU(), torch.nn.Linear(256, num_classes)
        )  # C_dc as train_recoder builds it
        classifier.load_state_dict(entry["classifier"])
        info = json.loads(entry["info"])
        val, chosen, candidates = entry["val"].numpy(), entry["chosen"].numpy(), entry["candidates"]
    except Exception as err:  # any unreadable or ill-fitting file is a miss, never a crash
        discarded(path, f"unreadable: {type(err).__name__}: {err}")
        return None
    if (
        not isinstance(info, dict)
        or not isinstance(candidates, torch.Tensor)
        or candidates.dtype != torch.float32
        or candidates.dim() != 2
        or candidates.shape[1] != d
        or not bool(torch.isfinite(candidates).all())
        or chosen.shape != (len(candidates),)
        or val.ndim != 1
    ):
        discarded(path, f"unexpected content: candidates {getattr(candidates, 'shape', None)}, chosen {chosen.shape}")
        return None
    return recoder.eval(), classifier.eval(), val, chosen, candidates, {**info, "cached": str(path)}


def bucket_index(num_sentences: np.ndarray) -> np.ndarray:
    """The k-bucket of each document (0 for k = 1, 1 for [2, 4), ..., len(K_EDGES) - 1 for [50, inf))."""
    return np.clip(np.searchsorted(np.asarray(K_EDGES), num_sentences, side="right") - 1, 0, len(K_EDGES) - 1)


def confusion_by_k(truth: np.ndarray, pred: np.ndarray, num_sentences: np.ndarray, num_classes: int) -> np.ndarray:
    """Confusion counts per k-bucket: int64 [len(K_EDGES), K, K]."""
    out = np.zeros((len(K_EDGES), num_classes, num_classes), dtype=np.int64)
    buckets = bucket_index(num_sentences)
    for b in np.unique(buckets):  # at most len(K_EDGES) iterations
        mask = buckets == b
        out[b] = confusion_matrix(truth[mask], pred[mask], num_classes)
    return out


def bucket_label(b: int) -> str:
    lo = K_EDGES[b]
    if b == len(K_EDGES) - 1:
        return f"{lo}+"
    hi = K_EDGES[b + 1] - 1
    return str(lo) if hi == lo else f"{lo}-{hi}"


__all__ = ["DocumentSetup", "K_EDGES", "bucket_index", "bucket_label", "build_setup", "confusion_by_k"]
