"""DeepCandidate: the M_TD mechanism of Meehan, Mrini & Chaudhuri, "Sentence-level
privacy for document embeddings" (ACL 2022, §4 and Appendix A, Alg. 1;
docs/SPEC.md §8).

A document is released as the index of one of m *public* candidate embeddings
F (recoded public document embeddings), chosen by the exponential mechanism
with an approximate Tukey depth as utility. For a document with recoded
sentence embeddings S (k x d) and p public directions V (uniform on S^{d-1},
drawn from ``projection_seed``, never from the data):

    h[i, j] = #{l : <s_l, v_j> >= <f_i, v_j>}        integer in 0..k
    u[i]    = -max_j |h[i, j] - k/2|                 in [-k/2, 0]
    P[i]    = softmax(epsilon * u / 2)[i]

Guarantee: pure epsilon-SentDP (Thm 4.1): for two documents with the same
number of sentences k that differ in one sentence, every output probability
changes by a factor of at most e^epsilon. Replacing a sentence moves every
h[i, j] by at most 1, so u has sensitivity 1 (this needs V and F independent of
the document), and the exponential mechanism at epsilon * u / 2 is epsilon-DP.
k itself is revealed (it is not protected). Two documents with the same k and
no sentence in common are (epsilon * k / 2)-indistinguishable, since u ranges
over an interval of length k/2 (docs/SPEC.md §8.5), better than group
privacy's k * eps. The released index points to a public embedding: its
downstream use is post-processing.

Computation. Exact in float64 (no approximation beyond the paper's). For each
projection the candidate projections are sorted once and cached; a document's
sentences are located among them with one batched ``searchsorted`` (k * p
binary searches), and per-rank counts, a cumulative sum and a lookup by rank
give #{l : s_l < f_i} for every candidate and projection, i.e. k - h. This costs
O(p * m) per document whatever k is, and never builds the m x k x p comparison
tensor. Documents are processed in chunks whose (documents x projections x m)
count block stays under ``block_elements`` elements.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import torch

from mechanisms import random_source

from .base import DocumentMechanism, check_documents, check_epsilon, sample_device
from .guarantee import Guarantee

DEFAULT_NUM_PROJECTIONS = 100  # the paper tunes p in 10..100; the third-party code fixes 100
MAX_NUM_PROJECTIONS = 10_000
BLOCK_ELEMENTS = 2**24  # (documents x projections x m) counts per chunk: 32 MiB of int16


def random_directions(dim: int, num_projections: int, seed: int) -> torch.Tensor:
    """The public directions V [p, d]: normalised Gaussians, uniform on S^{d-1}, float64 on the CPU.

    Drawn from ``torch.Generator().manual_seed(seed)`` only, so V is the same on
    every machine and device and never depends on the data.
    """
    gen = torch.Generator().manual_seed(int(seed))
    v = torch.randn(num_projections, dim, generator=gen, dtype=torch.float64)
    return v / v.norm(dim=1, keepdim=True).clamp_min(1e-300)


def exponential_log_probs(utilities: torch.Tensor, epsilon: float) -> torch.Tensor:
    """log softmax(epsilon * u / 2) over the last axis, float64: the exponential mechanism for sensitivity 1.

    Exact in log space: no underflow at epsilon = 1000 (logits down to -epsilon * k / 4).
    """
    return torch.log_softmax(utilities.to(torch.float64) * (float(epsilon) / 2.0), dim=-1)


def deep_candidate_probability(
    epsilon: float, num_candidates: int, num_deep: int, depth: int, num_sentences: int | None = None
) -> float:
    """P[M_TD samples one of ``num_deep`` candidates of depth ``depth``], all others at depth 0 (Table 1).

    "Depth" is the paper's main-text utility, the approximate Tukey depth
    min_j min(h_j, k - h_j) in 0..floor(k/2). Since k/2 - |h - k/2| = min(h, k - h),
    the appendix utility used by the mechanism is u = depth - k/2; the shift by
    k/2 cancels in the softmax, so the result does not depend on k
    (``num_sentences``, default 2 * depth, the shortest document with that depth).
    Computed with :func:`exponential_log_probs`, the mechanism's own softmax.
    """
    k = 2 * depth if num_sentences is None else num_sentences
    if not 0 <= depth <= k // 2:
        raise ValueError(f"depth must lie in 0..floor(k/2) = 0..{k // 2}, got {depth}")
    if not 0 <= num_deep <= num_candidates:
        raise ValueError(f"num_deep must lie in 0..num_candidates, got {num_deep}")
    u = torch.full((num_candidates,), -k / 2, dtype=torch.float64)
    u[:num_deep] = depth - k / 2
    return float(exponential_log_probs(u, epsilon)[:num_deep].logsumexp(0).exp())


@dataclass(frozen=True)
class CandidateIndex:
    """Candidate projections sorted per direction, on one device.

    ``sorted_proj[j]`` holds <f_i, v_j> in ascending order and ``rank[j, i]``
    is the position of candidate i in it (ties in any order: a tie block is
    either entirely <= a sentence projection or entirely above it).
    """

    sorted_proj: torch.Tensor  # [p, m] float64
    rank: torch.Tensor  # [p, m] int64

    @classmethod
    def build(cls, candidate_proj: torch.Tensor) -> CandidateIndex:
        """Index of candidate projections ``[m, p]``."""
        values, order = candidate_proj.to(torch.float64).T.sort(dim=1)
        rank = torch.empty_like(order)
        rank.scatter_(1, order, torch.arange(order.shape[1], device=order.device).expand_as(order).contiguous())
        return cls(values.contiguous(), rank)

    def to(self, device: torch.device) -> CandidateIndex:
        return CandidateIndex(self.sorted_proj.to(device), self.rank.to(device))


def depth_utilities(
    sentence_proj: torch.Tensor, lengths: torch.Tensor, index: CandidateIndex, block_elements: int = BLOCK_ELEMENTS
) -> torch.Tensor:
    """Utilities u [b, m] (float64, in [-k/2, 0]) of b documents from their sentence projections.

    ``sentence_proj`` [sum k_b, p] holds the projections of the documents'
    sentences one document after the other, ``lengths`` [b] their k_b. Exact:
    u[b, i] = -max_j |h - k_b/2| with h = #{l : proj[l, j] >= cand[i, j]}
    compared in float64 (+-inf projections compare as expected). The projections
    are processed in blocks so that b x block x (m + 1) stays under
    ``block_elements`` (at least one projection per block).
    """
    p, m = index.rank.shape
    b = lengths.numel()
    device = sentence_proj.device
    if b == 0:
        return torch.empty(0, m, dtype=torch.float64, device=device)
    # Counts are at most k: int16 halves the memory traffic of the (p, m, b) blocks.
    count_dtype = torch.int16 if int(lengths.max()) < 2**15 else torch.int32
    doc_of = torch.repeat_interleave(torch.arange(b, device=device), lengths)
    step = max(1, block_elements // (b * (m + 1)))
    below_min = below_max = None
    for j0 in range(0, p, step):
        j1 = min(p, j0 + step)
        offsets = torch.arange(j1 - j0, device=device)[:, None] * (m + 1)
        # pos[j, l] = #{i : cand[i, j] <= proj[l, j]}: sentence l lies >= exactly the candidates of rank < pos.
        pos = torch.searchsorted(index.sorted_proj[j0:j1], sentence_proj[:, j0:j1].T.contiguous(), right=True)
        # Layout (projection, rank, document): the rank lookup below copies whole rows of b counts.
        slot = ((offsets + pos) * b + doc_of).reshape(-1)
        counts = torch.zeros((j1 - j0) * (m + 1) * b, dtype=count_dtype, device=device)
        counts.index_add_(0, slot, torch.ones(slot.numel(), dtype=count_dtype, device=device))
        # below[j, r, b] = #{l : pos_l <= r} = #{l : proj[l, j] < cand[j]} for the candidate of rank r: k - h.
        below = counts.view(j1 - j0, m + 1, b).cumsum(1, dtype=count_dtype).view(-1, b)
        below = below.index_select(0, (offsets + index.rank[j0:j1]).reshape(-1)).view(j1 - j0, m, b)
        lo, hi = below.amin(dim=0), below.amax(dim=0)  # (aminmax stalls on small inputs under CPU load)
        below_min = lo if below_min is None else torch.minimum(below_min, lo)
        below_max = hi if below_max is None else torch.maximum(below_max, hi)
    assert below_min is not None and below_max is not None  # p >= 1 projections: the loop ran at least once
    below_min, below_max = below_min.T.contiguous(), below_max.T.contiguous()
    k = lengths.to(device=device, dtype=torch.int64)[:, None]
    # max_j |2h - k| = max_j |k - 2 below| = max(k - 2 min_j below, 2 max_j below - k), exact in integers.
    twice_dev = torch.maximum(k - 2 * below_min.long(), 2 * below_max.long() - k)
    return twice_dev.to(torch.float64) * -0.5


def utilities_from_projections(doc_projs: list[torch.Tensor], candidate_proj: torch.Tensor) -> torch.Tensor:
    """Utilities [n, m] of documents given directly by their projections ``[k_i, p]`` and candidates' ``[m, p]``.

    The mechanism's own computation (:func:`depth_utilities`), exposed for
    analysis and tests that need exact ties, which real projections rarely have.
    """
    lengths = torch.tensor([x.shape[0] for x in doc_projs], dtype=torch.int64)
    index = CandidateIndex.build(candidate_proj)
    proj = torch.cat([x.to(torch.float64) for x in doc_projs]) if doc_projs else candidate_proj[:0]
    return depth_utilities(proj, lengths, index)


def _check_candidates(candidates: torch.Tensor) -> torch.Tensor:
    if not isinstance(candidates, torch.Tensor):
        raise TypeError(f"candidates must be a torch.Tensor [m, d], got {type(candidates).__name__}")
    if candidates.dim() != 2 or candidates.shape[1] < 1:
        raise ValueError(f"candidates must have shape [m, d], got shape {tuple(candidates.shape)}")
    if candidates.shape[0] < 2:
        raise ValueError(f"candidates must hold m >= 2 embeddings, got m = {candidates.shape[0]}")
    if not torch.is_floating_point(candidates):
        raise ValueError(f"candidates must be a floating-point tensor, got {candidates.dtype}")
    if not bool(torch.isfinite(candidates).all()):
        raise ValueError("candidates contain NaN or infinite values")
    return candidates.detach()


def _check_count(value: int, name: str, low: int, high: int | None = None) -> int:
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Integral)
        or value < low
        or (high is not None and value > high)
    ):
        bound = f"in [{low}, {high}]" if high is not None else f">= {low}"
        raise ValueError(f"{name} must be an integer {bound}, got {value!r}")
    return int(value)


class DeepCandidate(DocumentMechanism):
    """DeepCandidate (M_TD): pure epsilon-SentDP per sentence, reveals k.

    Parameters
    ----------
    epsilon : float
        Privacy parameter per sentence, 0 < epsilon < inf.
    candidates : Tensor [m, d]
        The public candidate embeddings F (m >= 2), recoded like the sentences.
        Must not depend on any private document.
    num_projections : int
        p, the number of public random directions, in [1, 10000] (the paper
        tunes 10..100).
    projection_seed : int
        Public seed of the directions V; independent of the data.
    block_elements : int
        Memory knob: at most this many (documents x projections x m) counts are
        held at once. The results do not depend on it.

    Notes
    -----
    ``sanitize`` returns candidate indices; ``candidates[idx]`` is the release.
    """

    name = "deepcandidate"

    def __init__(
        self,
        epsilon: float,
        candidates: torch.Tensor,
        num_projections: int = DEFAULT_NUM_PROJECTIONS,
        projection_seed: int = 0,
        block_elements: int = BLOCK_ELEMENTS,
    ) -> None:
        self.epsilon = check_epsilon(epsilon)
        self.candidates = _check_candidates(candidates)
        self.num_projections = _check_count(num_projections, "num_projections", 1, MAX_NUM_PROJECTIONS)
        self.projection_seed = _check_count(projection_seed, "projection_seed", 0, 2**63 - 1)
        self.block_elements = _check_count(block_elements, "block_elements", 1)
        self.num_candidates, self.dim = self.candidates.shape
        self.directions = random_directions(self.dim, self.num_projections, self.projection_seed)
        candidate_proj = self.candidates.to("cpu", torch.float64) @ self.directions.T
        if not bool(torch.isfinite(candidate_proj).all()):
            raise ValueError("candidate projections overflow float64: rescale the candidates")
        # Candidate projections are computed once on the CPU and copied to other devices, so that
        # they are the same numbers wherever the documents are processed.
        cpu = torch.device("cpu")
        self._index = {cpu: CandidateIndex.build(candidate_proj)}
        self._directions = {cpu: self.directions}

    @property
    def guarantee(self) -> Guarantee:
        """Pure epsilon per sentence: neighbours have the same k and differ in one sentence (k is revealed)."""
        return Guarantee(notion="pure", epsilon=self.epsilon, granularity="sentence")

    whole_document = "epsilon * k / 2"

    def document_guarantee(self, num_sentences: int) -> Guarantee:
        """Pure epsilon * k / 2 against replacing all k sentences (u spans k/2; docs/SPEC.md §8.5), not k * epsilon."""
        k = _check_count(num_sentences, "num_sentences", 0)
        return Guarantee(notion="pure", epsilon=self.epsilon * k / 2, granularity="document")

    # ------------------------------------------------------------------ utilities
    def _on(self, device: torch.device) -> tuple[torch.Tensor, CandidateIndex]:
        if device not in self._index:
            cpu = torch.device("cpu")
            self._directions[device] = self._directions[cpu].to(device)
            self._index[device] = self._index[cpu].to(device)
        return self._directions[device], self._index[device]

    def _chunks(self, docs: list[torch.Tensor], device: torch.device):
        """Yield (start, stop, utilities [stop - start, m]) over consecutive chunks of checked ``docs``."""
        directions, index = self._on(device)
        per_doc = self.num_projections * (self.num_candidates + 1)
        start = 0
        while start < len(docs):
            # Grow the chunk while its count block and its float64 sentences fit the budget.
            stop, sentences = start + 1, docs[start].shape[0]
            while stop < len(docs):
                more = sentences + docs[stop].shape[0]
                too_many = (stop + 1 - start) * per_doc > self.block_elements
                if too_many or more * (self.dim + self.num_projections) > self.block_elements:
                    break
                stop, sentences = stop + 1, more
            chunk = docs[start:stop]
            s = torch.cat([x.to(device=device, dtype=torch.float64) for x in chunk])
            # Each row's projection depends on that sentence only (its last bit may depend on the
            # chunk's shape, which is a function of the lengths: neighbours get the same arithmetic).
            proj = s @ directions.T
            if bool(torch.isnan(proj).any()):
                raise ValueError("sentence projections overflow float64: rescale the sentence embeddings")
            lengths = torch.tensor([x.shape[0] for x in chunk], dtype=torch.int64, device=device)
            yield start, stop, depth_utilities(proj, lengths, index, self.block_elements)
            start = stop

    @torch.no_grad()
    def batch_utilities(self, docs: list[torch.Tensor]) -> torch.Tensor:
        """u(x, f_i) for every document and candidate: [n, m] float64 on the first document's device."""
        docs = check_documents(docs, dim=self.dim)
        device = docs[0].device if docs else torch.device("cpu")
        out = torch.empty(len(docs), self.num_candidates, dtype=torch.float64, device=device)
        for start, stop, u in self._chunks(docs, device):
            out[start:stop] = u
        return out

    def utilities(self, doc: torch.Tensor) -> torch.Tensor:
        """u(x, f_i) = -max_j |h_j(x, f_i) - k/2| for each candidate: [m] float64, values in {0, -1/2, ..., -k/2}."""
        return self.batch_utilities([doc])[0]

    def log_probs(self, doc: torch.Tensor) -> torch.Tensor:
        """The exact output law of ``sanitize`` for ``doc`` [k, d]: log P[i], float64 [m], logsumexp = 0."""
        return exponential_log_probs(self.utilities(doc), self.epsilon)

    # ------------------------------------------------------------------ release
    @torch.no_grad()
    def sanitize(self, docs: list[torch.Tensor], generator: torch.Generator | None = None) -> torch.Tensor:
        """One independent candidate index per document (LongTensor [n]), i ~ softmax(epsilon * u / 2).

        Gumbel-max in log space: argmax_i(epsilon * u_i / 2 + G_i), G_i = -log E_i,
        E_i ~ Exp(1) i.i.d. from ``generator`` (on its device). Returned on the
        first document's device.
        """
        docs = check_documents(docs, dim=self.dim)
        out_device = docs[0].device if docs else torch.device("cpu")
        device = sample_device(out_device, generator)
        idx = torch.empty(len(docs), dtype=torch.int64, device=device)
        half_eps = self.epsilon / 2.0
        for start, stop, u in self._chunks(docs, device):
            exp_noise = random_source.exponential_(torch.empty(u.shape, dtype=u.dtype, device=device), generator)
            idx[start:stop] = (u * half_eps - exp_noise.log()).argmax(dim=1)
        return idx.to(out_device)
