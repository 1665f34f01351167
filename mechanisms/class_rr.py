"""The task-aware release: the public classifier's class of a sentence embedding,
through K-ary randomized response (Warner 1965) or s-subset selection (Wang et
al. 2016; Ye & Barg 2018). Derivations: docs/SPEC.md §16.5-16.6.

The input row is the output of the run's public input map ``map-in =
"supervised"`` (``fl.maps.input_map.supervised_map``): its first coordinates
are the public logistic regression's logit coordinates: one, the logit of class
1 against class 0, for two classes; for K > 2 classes the K logits expressed in
the orthonormal basis H [K, K - 1] of the sum-zero subspace
(:func:`sum_zero_basis`, K - 1 coordinates: the softmax ignores a common
shift). The public class is

    c(x) = 1{x_0 > 0}                          (K = 2),
    c(x) = argmax_{j < K} (H x_{:K-1})_j       (K > 2; ties go to the lowest index),

computed on the row normalised onto the unit sphere (a positive scaling, which
changes neither sign nor argmax; rows of norm < 1e-12 become e1, a public
vector, as in every sentence mechanism). c is a deterministic function of the
input computed with public parameters, so a release of c(x) through an
epsilon-LDP channel is epsilon-LDP in x (post-processing of a public map).

Guarantee: pure epsilon-LDP per sentence embedding.

* ``subset_size = 1``: K-RR of c, keep probability e^eps / (e^eps + K - 1)
  (the sampler of ``mechanisms.randomized_response``), released one-hot.
* ``subset_size = s`` (1 < s < K): a set S of s classes with
  P(S | c) = e^eps / Z if c in S, 1 / Z otherwise,
  Z = C(K-1, s-1) e^eps + C(K-1, s); released multi-hot. Sampler: with
  probability pi = s e^eps / (s e^eps + K - s) S is c plus s - 1 classes drawn
  uniformly from the K - 1 others, else s classes drawn uniformly from the
  K - 1 others.

Every ratio P(S | c) / P(S | c') is 1 or e^{+-eps}: the bound is epsilon, tight
for c != c' (some S holds c and not c'), i.e. whenever the public classifier
can output two different classes. The exact law is exposed
(:meth:`ClassRR.log_transition_matrix`, :meth:`ClassRR.log_output_probabilities`,
:meth:`ClassRR.log_probability`) so that tests and audits check the sampler
and the e^eps bound against it.
"""

from __future__ import annotations

import itertools
import math

import torch

from mechanisms import random_source

from .base import SentenceMechanism, check_embeddings, check_epsilon, sample_device
from .guarantee import Guarantee
from .randomized_response import RandomizedResponse

MAX_ENUMERATED_SUBSETS = 1_000_000  # log_transition_matrix enumerates the C(K, s) possible releases


def sum_zero_basis(num_classes: int) -> torch.Tensor:
    """The Helmert basis H [K, K - 1] (float64) of the sum-zero subspace of R^K: column j - 1 is
    (1, ..., 1, -j, 0, ..., 0) / sqrt(j (j + 1)) with j ones. Orthonormal columns, each summing to 0, in
    closed form (no factorisation whose signs could differ between machines): the supervised map
    writes K > 2 logits in it, and a node recovers them as ``H @ coordinates`` up to a common shift."""
    k = int(num_classes)
    if k < 2:
        raise ValueError(f"num_classes must be >= 2, got {num_classes!r}")
    h = torch.zeros((k, k - 1), dtype=torch.float64)
    for j in range(1, k):
        h[:j, j - 1] = 1.0
        h[j, j - 1] = -float(j)
        h[:, j - 1] /= math.sqrt(j * (j + 1))
    return h


def logit_class(z: torch.Tensor, num_classes: int) -> torch.Tensor:
    """The class the supervised map's logit coordinates ``z`` [n, >= k] name (LongTensor [n]): 1{z_0 > 0}
    for two classes, else the argmax of the K logits ``H z[:, :K-1]`` (:func:`sum_zero_basis`; first
    index on ties). Positive scaling changes neither, so it reads the normalised row as well."""
    if num_classes == 2:
        return (z[:, 0] > 0).long()
    logits = z[:, : num_classes - 1].to(torch.float64) @ sum_zero_basis(num_classes).to(z.device).T
    return logits.argmax(dim=1)


class ClassRR(SentenceMechanism):
    """Randomized response of the public class: pure epsilon-LDP per row.

    Its release is a class (a discrete choice), so it has no gradient path (``gradient_path``).

    Parameters
    ----------
    epsilon : float
        Privacy parameter, 0 < epsilon < inf; the release is pure epsilon-LDP
        per sentence (notion "pure", delta 0, no metric, granularity "sentence").
    num_classes : int
        K >= 2, the number of classes of the public classifier.
    subset_size : int
        s with 1 <= s < K: the release is a one-hot row (s = 1, K-RR) or the
        multi-hot row of a set of s classes (s-subset selection).
    input_dim : int or None
        d, checked now when given (d >= 2 for K = 2, d >= K otherwise), and
        then required of every call.

    Notes
    -----
    The release is a float [n, K] row of the input's dtype (``output_dim(d) =
    K``) on the input's device (drawn on the generator's device when one is
    given), with no gradient path to the input.
    """

    name = "class_rr"
    gradient_path = False  # the release is a class: clean(x) is a one-hot row, constant in x almost everywhere

    def __init__(self, epsilon: float, num_classes: int, subset_size: int = 1, input_dim: int | None = None) -> None:
        self.epsilon = check_epsilon(epsilon)
        if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 2:
            raise ValueError(f"num_classes must be an integer >= 2, got {num_classes!r}")
        if isinstance(subset_size, bool) or not isinstance(subset_size, int) or not 1 <= subset_size < num_classes:
            raise ValueError(
                f"subset_size must be an integer with 1 <= subset_size < num_classes = {num_classes}, "
                f"got {subset_size!r} (a set of all K classes would release nothing)"
            )
        self.num_classes = num_classes
        self.subset_size = subset_size
        self._rr = RandomizedResponse(self.epsilon)
        self.input_dim: int | None = None
        if input_dim is not None:
            if isinstance(input_dim, bool) or not isinstance(input_dim, int):
                raise ValueError(f"input_dim must be an integer, got {input_dim!r}")
            self._check_dim(input_dim)
            self.input_dim = input_dim

    @property
    def guarantee(self) -> Guarantee:
        # one class per release: K-ary randomized response of the public class (exact event); a larger
        # subset is composed as the generic pair
        if self.subset_size == 1:
            return Guarantee(
                notion="pure",
                epsilon=self.epsilon,
                granularity="sentence",
                accounting="randomized_response",
                buckets=self.num_classes,
            )
        return Guarantee(notion="pure", epsilon=self.epsilon, granularity="sentence")

    def output_dim(self, d: int) -> int:
        """K: a release is a one-hot (s = 1) or multi-hot (s > 1) row over the classes."""
        return self.num_classes

    def _check_dim(self, d: int) -> None:
        need = 2 if self.num_classes == 2 else self.num_classes  # the logit coordinates and the map's constant
        if d < need:
            raise ValueError(
                f"class_rr with {self.num_classes} classes reads the public classifier's logits from the first "
                f"{1 if self.num_classes == 2 else self.num_classes - 1} coordinate(s) of the supervised map "
                f"(map-dim >= {need}): the input dimension must be >= {need}, got {d}"
            )
        if self.input_dim is not None and d != self.input_dim:
            raise ValueError(f"input dimension {d} does not match the input_dim {self.input_dim} class_rr was given")

    # ------------------------------------------------------------------ the public class
    def public_class(self, x: torch.Tensor) -> torch.Tensor:
        """c(x) per row (LongTensor [n] on ``x``'s device): 1{x_0 > 0} for K = 2, otherwise the argmax of
        the K logits ``H x[:, :K-1]`` (:func:`sum_zero_basis`; first index on ties); rows of norm < 1e-12
        get e1's class."""
        x = check_embeddings(x)
        self._check_dim(x.shape[1])
        k = self.num_classes
        cls = logit_class(x, k)
        tiny = torch.linalg.vector_norm(x.to(torch.float64), dim=1) < 1e-12
        if bool(tiny.any()):  # normalize_rows maps them to e1: class 1 for K = 2, class 0 otherwise
            cls[tiny] = 1 if k == 2 else 0
        return cls

    def clean(self, x: torch.Tensor) -> torch.Tensor:
        """The one-hot row of c(x) (the noise-free release; not differentiable in x)."""
        return torch.nn.functional.one_hot(self.public_class(x), self.num_classes).to(x.dtype)

    def default_audit_pair(self, dim: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Two unit inputs [dim] of public classes 0 and 1, float64: the tight pair of the audit
        (``mechanisms.audit.default_pair``). K = 2: -e1 and e1; K > 2: the sum-zero coordinates of the
        indicators of classes 0 and 1 (unit vectors whose logits are e_c - 1/K)."""
        self._check_dim(dim)
        x, x_prime = torch.zeros(dim, dtype=torch.float64), torch.zeros(dim, dtype=torch.float64)
        if self.num_classes == 2:
            x[0], x_prime[0] = -1.0, 1.0
        else:
            h = sum_zero_basis(self.num_classes)
            k = self.num_classes
            x[: k - 1], x_prime[: k - 1] = h[0], h[1]  # H^T e_c, rows of H
            x, x_prime = x / x.norm(), x_prime / x_prime.norm()
        return x, x_prime

    # ------------------------------------------------------------------ the exact law
    @property
    def keep_probability(self) -> float:
        """pi = P(c in S) = s e^eps / (s e^eps + K - s) (for s = 1 the K-RR keep probability)."""
        s, k = self.subset_size, self.num_classes
        return 1.0 / (1.0 + (k - s) / s * math.exp(-self.epsilon))

    def _log_probs_in_out(self) -> tuple[float, float]:
        """(log P(S | c) for c in S, for c not in S): -log C(K-1, s-1) - log1p((K-s)/s e^-eps), minus eps."""
        s, k = self.subset_size, self.num_classes
        log_in = -math.log(math.comb(k - 1, s - 1)) - math.log1p((k - s) / s * math.exp(-self.epsilon))
        return log_in, log_in - self.epsilon

    def _log_law(self, contains: torch.Tensor) -> torch.Tensor:
        """log P(S | c) (float64, ``contains``'s shape and device) from the boolean ``c in S``."""
        log_in, log_out = (
            torch.tensor(v, dtype=torch.float64, device=contains.device) for v in self._log_probs_in_out()
        )
        return torch.where(contains, log_in, log_out)

    @property
    def subsets(self) -> tuple[tuple[int, ...], ...]:
        """The C(K, s) possible releases as sorted class tuples, in lexicographic order
        (for s = 1: (0,), (1,), ..., (K-1,)); the columns of :meth:`log_transition_matrix`."""
        return tuple(itertools.combinations(range(self.num_classes), self.subset_size))

    def _check_enumerable(self) -> None:
        k, s = self.num_classes, self.subset_size
        if math.comb(k, s) > MAX_ENUMERATED_SUBSETS:
            raise ValueError(f"C({k}, {s}) releases are too many to enumerate: use log_probability")

    def log_transition_matrix(self) -> torch.Tensor:
        """[K, C(K, s)] float64 matrix of log P[release = S_j | c = i] (S_j = ``subsets[j]``).

        For s = 1 it is ``RandomizedResponse(eps).log_transition_matrix(K)``.
        Refused (``ValueError``) beyond 1e6 subsets; :meth:`log_probability`
        needs no enumeration.
        """
        k = self.num_classes
        if self.subset_size == 1:
            return self._rr.log_transition_matrix(k)
        self._check_enumerable()
        combos = torch.combinations(torch.arange(k), r=self.subset_size)  # lexicographic, as ``subsets``
        members = torch.zeros((combos.shape[0], k), dtype=torch.bool).scatter_(1, combos, True)
        return self._log_law(members.T)

    def log_output_probabilities(self, x: torch.Tensor) -> torch.Tensor:
        """[n, C(K, s)] float64: row i is the exact log-law of the release of ``x[i]``
        (the row c(x_i) of :meth:`log_transition_matrix`)."""
        cls = self.public_class(x)
        return self.log_transition_matrix()[cls.cpu()].to(cls.device)

    def log_probability(self, x: torch.Tensor, releases: torch.Tensor) -> torch.Tensor:
        """log P[release_i | x_i] per row (float64 [n]) of one-hot / multi-hot ``releases`` [n, K].

        ``-inf`` for a row that is not the indicator of s classes (not a possible release).
        """
        cls = self.public_class(x)
        r = releases.detach().to(cls.device)
        if r.shape != (cls.numel(), self.num_classes):
            raise ValueError(f"releases must have shape {(cls.numel(), self.num_classes)}, got {tuple(r.shape)}")
        valid = ((r == 0) | (r == 1)).all(dim=1) & (r.sum(dim=1) == self.subset_size)
        contains = r.gather(1, cls.unsqueeze(1)).squeeze(1) == 1
        return self._log_law(contains).masked_fill(~valid, -math.inf)

    def subset_index(self, releases: torch.Tensor) -> torch.Tensor:
        """The column of :meth:`log_transition_matrix` of each release row (LongTensor [n] on the CPU).

        Lexicographic rank of the classes c_1 < ... < c_s of the row:
        C(K, s) - 1 - sum_i C(K - 1 - c_i, s - i + 1) (i = 1..s). ``ValueError`` for a
        row that is not the indicator of s classes.
        """
        self._check_enumerable()
        k, s = self.num_classes, self.subset_size
        r = releases.detach().cpu()
        if r.dim() != 2 or r.shape[1] != k:
            raise ValueError(f"releases must have shape [n, {k}], got {tuple(r.shape)}")
        if not bool((((r == 0) | (r == 1)).all(dim=1) & (r.sum(dim=1) == s)).all()):
            raise ValueError(f"a release is not the indicator of {s} classes")
        # The s classes in increasing order: the largest values of (K - j) on the ones.
        chosen = ((r == 1) * (k - torch.arange(k))).topk(s, dim=1).values.neg().add(k)  # [n, s], c_1 < ... < c_s
        binom = torch.tensor([[math.comb(a, b) for b in range(s + 1)] for a in range(k)], dtype=torch.int64)
        steps = torch.arange(s, 0, -1)  # s - i + 1 for i = 1..s
        return math.comb(k, s) - 1 - binom[k - 1 - chosen, steps].sum(dim=1)

    # ------------------------------------------------------------------ sampling
    @torch.no_grad()
    def sanitize(self, x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        """One independent release per row of ``x`` ([n, d]): the [n, K] indicator of the released class(es)."""
        cls = self.public_class(x)
        device = sample_device(x.device, generator)
        cls = cls.to(device)
        n, k, s = cls.numel(), self.num_classes, self.subset_size
        if s == 1:
            released = self._rr.sanitize(cls, k, generator=generator).to(device)
            out = torch.nn.functional.one_hot(released, k)
        else:
            # The s smallest of K i.i.d. uniform keys are a uniform s-subset; c's key is forced
            # below every other key (c in S, with probability pi) or above them (c not in S).
            keep = (
                random_source.rand(n, generator=generator, dtype=torch.float64, device=device) < self.keep_probability
            )
            keys = random_source.rand((n, k), generator=generator, dtype=torch.float64, device=device)
            forced = torch.where(keep, -1.0, 2.0).to(torch.float64)
            keys.scatter_(1, cls.unsqueeze(1), forced.unsqueeze(1))
            chosen = keys.topk(s, dim=1, largest=False).indices
            out = torch.zeros((n, k), dtype=torch.int64, device=device).scatter_(1, chosen, 1)
        return out.to(dtype=x.dtype, device=x.device)
