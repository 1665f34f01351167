"""The perturb-and-project skeleton every word mechanism shares (Feyisetan et al. 2020).

Per word token w (docs/SPEC.md §5.1): x = phi(w) (clipped for the clipped
mechanisms), y = x + Z with fresh noise Z per token, output
argmin_v ||phi(v) - y||_2 over the real words of the space (exact,
:class:`~mechanisms.words.nearest.NearestWords`). The projection is
post-processing. Subclasses give the noise and the guarantee.
"""

from __future__ import annotations

import math
from abc import abstractmethod
from functools import lru_cache

import torch

from ..base import WordMechanism, check_epsilon, sample_device
from ..noise import clip_l2
from .nearest import NearestWords
from .vocab import WordSpace, load_space

TOKEN_BLOCK = 2**16  # tokens per noise/projection block (bounds memory; blocks are independent)


@lru_cache(maxsize=8)
def nearest_index(space: WordSpace, clip: float | None) -> NearestWords:
    """The NN index over the real words of ``space`` (clipped to radius ``clip`` when given), cached."""
    vectors = space.vectors[: space.num_words].to(torch.float64)
    return NearestWords(vectors if clip is None else clip_l2(vectors, clip))


def check_ids(ids: torch.Tensor, space: WordSpace) -> torch.Tensor:
    """A 1-D integer tensor of ids in ``[0, len(space.words))`` (``unk`` allowed), detached."""
    if not isinstance(ids, torch.Tensor):
        raise TypeError(f"ids must be a torch.Tensor (LongTensor [m]), got {type(ids).__name__}")
    if ids.dim() != 1:
        raise ValueError(f"ids must be 1-D, got shape {tuple(ids.shape)}")
    if ids.dtype not in (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8):
        raise ValueError(f"ids must be an integer tensor, got {ids.dtype}")
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) > space.unk):
        raise ValueError(
            f"ids must lie in [0, {space.unk}] (unk = {space.unk}), got range [{int(ids.min())}, {int(ids.max())}]"
        )
    return ids.detach().to(torch.int64)


def check_clip(clip: float | None) -> float | None:
    """``None`` (the space's median word norm) or a radius > 0, finite."""
    if clip is None:
        return None
    try:
        c = float(clip)
    except (TypeError, ValueError):
        raise ValueError(f"clip must be a number, got {clip!r}") from None
    if not (c > 0 and math.isfinite(c)):
        raise ValueError(f"clip must be > 0 and finite, got {clip!r}")
    return c


@lru_cache(maxsize=8)
def median_norm(space: WordSpace) -> float:
    """Median L2 norm of the real words' vectors (a public statistic of the space)."""
    return float(space.vectors[: space.num_words].to(torch.float64).norm(dim=1).median())


class PerturbProject(WordMechanism):
    """Shared constructor and ``sanitize_ids`` of the vector word mechanisms.

    Parameters
    ----------
    epsilon : float
        Privacy parameter per word, 0 < epsilon < inf.
    space : WordSpace or str
        The public word space: ``"glove"`` (GloVe 6B 50d, default), ``"minilm"``
        (all-MiniLM-L6-v2 word pieces) or a :class:`WordSpace`. A name is loaded
        lazily, on first use, and cached per process.
    vocab_size : int or None
        Keep only the first ``vocab_size`` words (GloVe: the most frequent).
    """

    def __init__(self, epsilon: float, space: WordSpace | str = "glove", vocab_size: int | None = None) -> None:
        self.epsilon = check_epsilon(epsilon)
        if not isinstance(space, (WordSpace, str)):
            raise ValueError(f"space must be a WordSpace or a name, got {type(space).__name__}")
        if vocab_size is not None and (
            isinstance(vocab_size, bool) or int(vocab_size) != vocab_size or int(vocab_size) < 2
        ):
            raise ValueError(f"vocab_size must be an integer >= 2, got {vocab_size!r}")
        self._space_arg = space
        self._vocab_size = None if vocab_size is None else int(vocab_size)
        self._space: WordSpace | None = None
        self._inputs: dict[str, torch.Tensor] = {}
        if isinstance(space, WordSpace) or space not in ("glove", "minilm"):
            self._space = load_space(space, self._vocab_size)  # validates names eagerly

    @property
    def space(self) -> WordSpace:
        if self._space is None:
            self._space = load_space(self._space_arg, self._vocab_size)
        return self._space

    @property
    def clip_radius(self) -> float | None:
        """Radius of the L2 clip applied to inputs and candidates, ``None`` when not clipped."""
        return None

    @property
    def index(self) -> NearestWords:
        return nearest_index(self.space, self.clip_radius)

    def input_vectors(self, device: torch.device) -> torch.Tensor:
        """float64 table of the vectors that are perturbed (clipped when the mechanism clips), per device."""
        key = str(device)
        if key not in self._inputs:
            table = self.space.vectors.to(device=device, dtype=torch.float64)
            if self.clip_radius is not None:
                table = clip_l2(table, self.clip_radius)
            self._inputs[key] = table
        return self._inputs[key]

    @abstractmethod
    def noise(self, num: int, generator: torch.Generator | None, device: torch.device) -> torch.Tensor:
        """``[num, dim]`` float64 noise, independent across rows (tokens)."""

    @torch.no_grad()
    def perturb(self, ids: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        """The noisy vectors x + Z (float64, on the sampling device), before projection."""
        ids = check_ids(ids, self.space)
        device = sample_device(ids.device, generator)
        x = self.input_vectors(device)[ids.to(device)]
        return x + self.noise(x.shape[0], generator, device)

    @torch.no_grad()
    def sanitize_ids(self, ids: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        ids = check_ids(ids, self.space)
        out = torch.empty_like(ids)
        index = self.index
        for start in range(0, ids.shape[0], TOKEN_BLOCK):
            y = self.perturb(ids[start : start + TOKEN_BLOCK], generator)
            out[start : start + TOKEN_BLOCK] = index(y).to(ids.device)
        return out


class ClippedPerturbProject(PerturbProject):
    """A perturb-and-project mechanism that first clips to the L2 ball of radius C (docs/SPEC.md §7.1).

    Inputs and candidate vectors are clipped alike (docs/SPEC.md §7.1: "clip them
    too, for consistent geometry"); ``clip=None`` takes C = the median word norm
    of the space, so that about half the words keep their vector. The guarantees
    of the clipped mechanisms do not depend on C (the noise scales with it).
    """

    def __init__(
        self, epsilon: float, clip: float | None = None, space: WordSpace | str = "glove", vocab_size: int | None = None
    ) -> None:
        self._clip = check_clip(clip)
        super().__init__(epsilon, space=space, vocab_size=vocab_size)

    @property
    def clip_radius(self) -> float:
        return self._clip if self._clip is not None else median_norm(self.space)


__all__ = ["ClippedPerturbProject", "PerturbProject", "check_clip", "check_ids", "median_norm", "nearest_index"]
