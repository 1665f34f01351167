"""Choosing a local-DP release recipe on public data only (``sanitas tune``).

A recipe is what the nodes do with a whole-record budget of pure epsilon ``E`` per user: the
input map M1 (``map-in``, ``map-dim``), the sentence mechanism, and the split of ``E`` between
the embedding (``sentence-epsilon``, in the mechanism's own units) and the label
(``label-mechanism``, ``label-epsilon``). Choosing it on private data, or on the test split,
would spend privacy nobody counted; here every candidate is scored by emulating the run on the
*public* documents alone (Papernot & Steinke 2022 on the cost of tuning on private data):

1. the public documents are split (seeded) into a fitting part and a hold-out (the stand-in for
   the run's test users) by source group (``groups``: the containment groups of the public texts,
   :func:`fl.data.datasets.public_groups`), so that no near-duplicate phrase of one source sits on
   both sides (split by row, SST-2's public hold-out read 0.845 against 0.798 on the test split);
2. M1 is built from the fitting part as the run would build it from all public documents;
3. the fitting part is resampled to the run's number of private users ``N`` (at most
   ``MAX_EMULATED_USERS``), each row sanitized afresh at the candidate's sentence epsilon and
   its label through the label mechanism at the label epsilon, as the nodes would release them;
4. a fresh server model (the run's ``server-epochs``, batch size, learning rate, hidden width)
   trains on those releases and is scored on the hold-out's releases (test inputs sanitized
   as the run sanitizes them).

The best candidate's keys are returned with the whole table. Only public embeddings, public
labels and the run's release and server sections and seed (:class:`RecipeSpec`) are read, so the choice
is public: it costs no privacy.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import torch

from fl.config import SECTIONS, ConfigError, ReleaseConfig, RunConfig, ServerConfig
from fl.maps import input_map as maps
from fl.maps.class_means_emulation import CohortPlan
from fl.maps.class_means_emulation import emulate as emulate_means
from fl.maps.pipeline import train_and_score
from fl.maps.public_model import PublicModel, fit_public_model, projection_map

#: Share of the public documents held out as the emulated test users.
HOLDOUT_FRACTION = 0.2
#: The emulated population: the run's private users, at most this many (the emulation's cost).
MAX_EMULATED_USERS = 20_000
#: Server epochs of an emulated run (at most the run's own ``server-epochs``).
EMULATED_EPOCHS = 5
#: Releases of each hold-out document the emulated score averages over.
VALIDATION_DRAWS = 4
#: Shares of the whole-record budget given to the label in the default grid.
LABEL_SHARES: tuple[float, ...] = (0.05, 0.1, 0.2, 0.35)


@dataclass(frozen=True)
class RecipeSpec:
    """What emulating a run on public documents reads of it: the release section (M1: ``map-in``, ``map-dim``,
    ``map-scale``, ``map-seed``; the sentence and label mechanisms, their options and epsilons), the server
    section (``server-model``; the server model's training: ``server-epochs``, ``batch-size``,
    ``learning-rate``, ``hidden-dim``) and the run's ``seed`` (the hold-out splits and the server model's
    initialisation). A recipe changes keys of the first two (:meth:`with_keys`)."""

    release: ReleaseConfig
    server: ServerConfig
    seed: int

    @classmethod
    def from_config(cls, cfg: RunConfig) -> RecipeSpec:
        """The emulation inputs of a resolved run config."""
        return cls(cfg.release, cfg.server, int(cfg.users.seed))

    def with_keys(self, keys: Mapping[str, Any]) -> RecipeSpec:
        """A copy with run-config keys of the release and server sections set (a candidate's keys, a budget's
        split: ``{"map-dim": 2, "sentence-epsilon": 0.9}``), each changed section checked again by its own
        ``check`` (:meth:`fl.config.section.Section.with_keys`: :class:`~fl.config.ConfigError` naming the first
        bad key, or a key of another section). The rules across sections (:mod:`fl.config.rules`) read sections
        a spec does not hold: they were checked where the run config was resolved."""
        to_release = {k: v for k, v in keys.items() if k in SECTIONS["release"]}
        to_server = {k: v for k, v in keys.items() if k in SECTIONS["server"]}
        other = [k for k in keys if k not in to_release and k not in to_server]
        if other:
            raise ConfigError(f"a recipe sets keys of the release and server sections only, got {other[0]!r}")
        return RecipeSpec(self.release.with_keys(to_release), self.server.with_keys(to_server), self.seed)


@dataclass(frozen=True)
class Candidate:
    """One recipe: run-config keys (M1, the mechanism and its options) and the label's share of the budget."""

    name: str
    keys: Mapping[str, Any]
    label_share: float = 0.1


@dataclass
class Scored:
    """A candidate's keys for a budget and its emulated accuracy on the public hold-out."""

    candidate: Candidate
    values: dict[str, Any]
    accuracy: float
    extra: dict[str, Any] = field(default_factory=dict)


def default_candidates(num_classes: int, shares: Sequence[float] = LABEL_SHARES) -> list[Candidate]:
    """The default grid: the task-aware public-class release (K-ary randomized response of the public
    classifier's class), PrivUnit and Purkayastha on the supervised map, each at every label share.
    (PrivUnit on a 16-dimensional random projection scored at chance on SST-2 at pure 3 and 6 per user:
    the projection keeps little of the task, so it is not in the default grid.)"""
    k = 1 if num_classes == 2 else num_classes - 1  # the supervised map's logit coordinates
    smallest = k + 1
    recipes = [
        ("class_rr", {"map-in": "supervised", "map-dim": smallest, "map-scale": 1.0, "sentence-mechanism": "class_rr"}),
        (
            f"privunit-supervised-m{smallest}",
            {"map-in": "supervised", "map-dim": smallest, "map-scale": 1.0, "sentence-mechanism": "privunit"},
        ),
        (
            f"purkayastha-supervised-m{smallest}",
            {"map-in": "supervised", "map-dim": smallest, "map-scale": 0.25, "sentence-mechanism": "purkayastha"},
        ),
    ]
    return [
        Candidate(f"{name} label-share {s:g}", {**keys, "sentence-options": "", "label-mechanism": "rr"}, s)
        for name, keys in recipes
        for s in shares
    ]


#: Shares of the whole-record budget given to the label in the class-means grid (the debiased means need
#: the label more than a public-class release does: its noise is inverted, not averaged over).
CLASS_MEANS_SHARES: tuple[float, ...] = (0.1, 0.2, 0.35, 0.5)
#: Dimensions m' of the public projection tried by the class-means grid.
CLASS_MEANS_DIMS: tuple[int, ...] = (8, 16, 32, 64)


def class_means_candidates(
    dims: Sequence[int] = CLASS_MEANS_DIMS, shares: Sequence[float] = CLASS_MEANS_SHARES
) -> list[Candidate]:
    """The class-means grid (``sanitas tune --recipes class-means``): PrivUnit (unbiased) on the public projection
    of each dimension m', labels through randomized response at each share, the server's debiased class
    means combined with the public ones (``fl.maps.class_means``). Scored on the hold-out's *clean* rows:
    on-device inference, the deployment this recipe is for."""
    keys = {
        "map-in": "projection",
        "sentence-mechanism": "privunit",
        "sentence-options": "unbiased = true",
        "server-model": "class-means",
        "label-mechanism": "rr",
    }
    return [
        Candidate(f"class-means-projection-m{m} label-share {s:g}", {**keys, "map-dim": m}, s)
        for m in dims
        for s in shares
    ]


class CostNotLinear(ValueError):
    """A sentence mechanism whose pure-LDP cost is not linear in its epsilon: a budget cannot be split for it."""


def pure_per_unit(release: ReleaseConfig, input_dim: int, num_classes: int) -> float:
    """Pure-LDP epsilon of one release per unit of ``sentence-epsilon`` (pi for Purkayastha's angular
    metric, 2 for planar Laplace on the sphere, 1 for a pure mechanism). ``ValueError`` when the
    mechanism's cost is not linear in its epsilon (:class:`CostNotLinear`: a budget cannot then be split by a
    factor).

    ``release``: the run's release section (``sentence-mechanism``, ``sentence-options``; its epsilon is
    replaced by 1 and 2); ``input_dim``: the mechanism's input dimension m'; ``num_classes``: the run's
    classes (for a task-aware mechanism)."""
    costs = []
    for eps in (1.0, 2.0):
        trial = replace(release, sentence_epsilon=eps)
        mech = trial.mechanism("sentence", input_dim=input_dim, num_classes=num_classes)
        costs.append(float(mech.guarantee.as_ldp()[0]))
    if not (math.isfinite(costs[0]) and costs[0] > 0 and math.isclose(costs[1], 2 * costs[0], rel_tol=1e-9)):
        raise CostNotLinear(
            f"sentence-mechanism {release.sentence_mechanism!r}: its pure-LDP cost ({costs}) is not linear in "
            "sentence-epsilon, so a whole-record budget cannot be split for it"
        )
    return costs[0]


def split_budget(
    release: ReleaseConfig, total: float, label_share: float, input_dim: int, num_classes: int
) -> dict[str, Any]:
    """The keys that spend a whole-record pure ``total`` per user: ``label-epsilon = share * total`` (none
    when the label mechanism is ``"none"``: then the whole budget goes to the embedding and the figure
    is embedding-only) and ``sentence-epsilon`` = the rest over the mechanism's pure cost per unit.

    ``release``: the run's release section (``label-mechanism`` and the sentence mechanism,
    :func:`pure_per_unit`); ``label_share``: the label's share of ``total``; ``input_dim``: the sentence
    mechanism's input dimension m'; ``num_classes``: the run's classes."""
    if not (total > 0 and math.isfinite(total)):
        raise ValueError(f"the whole-record epsilon must be > 0 and finite, got {total}")
    if not 0.0 < label_share < 1.0 and release.label_mechanism != "none":
        raise ValueError(f"the label's share of the budget must lie in (0, 1), got {label_share}")
    label = 0.0 if release.label_mechanism == "none" else label_share * total
    per_unit = pure_per_unit(release, input_dim, num_classes)
    out: dict[str, Any] = {"sentence-epsilon": (total - label) / per_unit}
    if label:
        out["label-epsilon"] = label
    return out


def _holdout(groups: np.ndarray, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """(fitting rows, hold-out rows), sorted: whole source groups in a seeded order go to the hold-out
    until it holds at least ``HOLDOUT_FRACTION`` of the rows (at least one). Guarantees that no group
    has rows on both sides and at least 2 fitting rows, else a ``ValueError``. Deterministic for the
    generator's state."""
    from fl.data.sources import first_groups

    labels = np.asarray(groups)
    n, num_groups = len(labels), len(np.unique(labels))
    order = torch.randperm(num_groups, generator=generator).numpy()
    is_val = first_groups(labels, max(1, round(HOLDOUT_FRACTION * n)), order)
    if int((~is_val).sum()) < 2:
        raise ValueError(
            f"choosing a recipe needs more public documents: {n} in {num_groups} source group(s) leave "
            f"{int((~is_val).sum())} to fit on beside the hold-out"
        )
    return torch.from_numpy(np.flatnonzero(~is_val)), torch.from_numpy(np.flatnonzero(is_val))


def _start_map(release: ReleaseConfig, x: torch.Tensor, y: torch.Tensor, num_classes: int) -> torch.Tensor | None:
    """M1 from the fitting part alone, as the run builds it from the public split (``release``: ``map-in``,
    ``map-dim``, ``map-scale``, ``map-seed``): a [d (+ 1), m'] matrix, so that every row the emulated mechanism
    sees has the m' it was set up for (``None`` only for the identity, m' = d).

    ``map-in = "projection"`` is built here too (the fitting part's public model, then
    :func:`fl.maps.public_model.projection_map`, as :func:`fl.maps.public_start.projection_start` builds it for
    the run): a server model other than ``class-means`` on the public projection is emulated by :func:`emulate`
    and needs it (the class-means emulation builds its own from its public stand-in half)."""
    kind, m_prime = release.map_in, maps.map_dim(release, x.shape[1])
    if kind == "supervised":
        scale = float(release.map_scale) or 0.25
        return maps.supervised_map(x, y, num_classes, m_prime, scale)
    if kind in ("random", "identity"):
        return maps.input_map(kind, x.shape[1], m_prime, int(release.map_seed))
    if kind == "projection":
        return projection_map(x, fit_public_model(x, y, num_classes), m_prime)
    raise ValueError(f"sanitas tune emulates map-in 'supervised', 'projection', 'random' or 'identity', got {kind!r}")


def _halves(fit: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """The fitting rows cut in two, alternately (they are sorted, so source groups stay mostly whole): the
    stand-in for the public split and the stand-in for the private users of a class-means emulation."""
    rows = fit.numpy()
    return rows[0::2], rows[1::2]


def emulate_class_means(
    release: ReleaseConfig,
    x: torch.Tensor,
    y: torch.Tensor,
    split: tuple[torch.Tensor, torch.Tensor],
    model: PublicModel,
    num_classes: int,
    num_users: int,
    generator: torch.Generator,
    server: ServerConfig | None = None,
) -> float:
    """On-device accuracy of a ``class-means`` run emulated on public documents
    (:func:`fl.maps.class_means_emulation.emulate`): one half of the fitting part stands in for the public
    split, the other, resampled to the run's users (at most ``MAX_EMULATED_USERS``), for the private users.

    ``release``: the run's release section (``map-in``, ``map-dim``; the sentence mechanism, which must
    release without bias, and the label mechanism, ``rr`` or ``none``); ``split`` = (fitting rows, hold-out
    rows); ``model``: the public model of the public stand-in half; ``generator``: every draw; ``server``: the
    run's server section, whose ``cohorts``, ``cohort-map-dim`` and ``class-means-covariance`` the emulation
    follows (:class:`fl.maps.class_means_emulation.CohortPlan`)."""
    fit, val = split
    pub, priv = _halves(fit)
    m_prime = maps.map_dim(release, x.shape[1])
    mech = release.mechanism("sentence", input_dim=m_prime, num_classes=num_classes)
    second = mech.unbiased_moments(m_prime)
    if second is None:
        raise ValueError(f"server-model = 'class-means' needs unbiased releases; {release.sentence_mechanism!r} is not")
    law, label_sanitize = None, None
    if release.label_mechanism == "rr":
        label = release.mechanism("label")
        law = label.log_transition_matrix(num_classes)

        def label_sanitize(labels: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
            return label.sanitize(labels, num_classes, generator=gen)

    elif release.label_mechanism != "none":
        raise ValueError("sanitas tune emulates label-mechanism 'rr' or 'none'")
    xn, yn = x.cpu().numpy(), y.cpu().numpy()
    plan = None
    if server is not None and (server.cohorts > 1 or server.class_means_covariance == "releases"):

        def moments(dim: int) -> tuple[Any, float]:
            other = release.mechanism("sentence", input_dim=dim, num_classes=num_classes)
            return (lambda rows, gen: other.sanitize(rows, generator=gen)), float(other.unbiased_moments(dim))

        def covariance_law(dim: int) -> tuple[float, float] | None:
            return release.mechanism("sentence", input_dim=dim, num_classes=num_classes).second_moment_law(dim)

        releases = server.class_means_covariance == "releases"
        plan = CohortPlan(server.cohorts, server.cohort_map_dim, covariance_law if releases else None, moments)
    return emulate_means(
        model,
        (xn[pub], yn[pub]),
        (xn[priv], yn[priv]),
        (xn[val.numpy()], yn[val.numpy()]),
        num_classes,
        m_prime,
        lambda rows, gen: mech.sanitize(rows, generator=gen),
        second,
        law,
        label_sanitize,
        min(int(num_users), MAX_EMULATED_USERS),
        generator,
        plan,
    )


def emulate(
    spec: RecipeSpec,
    x: torch.Tensor,
    y: torch.Tensor,
    split: tuple[torch.Tensor, torch.Tensor],
    matrix: torch.Tensor | None,
    num_classes: int,
    num_users: int,
    generator: torch.Generator,
    draws: int = VALIDATION_DRAWS,
) -> float:
    """Accuracy of the run ``spec`` (its release and server sections and seed) emulated on public documents
    ``x``, ``y`` (see the module docstring): ``split`` = (fitting rows, hold-out rows), ``matrix`` = M1 built
    from the fitting rows alone; the hold-out is scored on ``draws`` independent releases of each document."""
    fit, val = split
    release = spec.release
    m_prime = maps.map_dim(release, x.shape[1])
    mech = release.mechanism("sentence", input_dim=m_prime, num_classes=num_classes)
    users = min(int(num_users), MAX_EMULATED_USERS)
    rows = fit[torch.randint(len(fit), (users,), generator=generator)]
    z = mech.sanitize(maps.apply_input_map(x[rows], matrix), generator=generator).to(torch.float32)
    labels = y[rows]
    if release.label_mechanism == "rr":
        labels = release.mechanism("label").sanitize(labels, num_classes, generator=generator)
    elif release.label_mechanism != "none":
        raise ValueError("sanitas tune emulates label-mechanism 'rr' or 'none'")
    held = val.repeat(draws)
    zv = mech.sanitize(maps.apply_input_map(x[held], matrix), generator=generator).to(torch.float32)
    epochs = max(1, min(int(spec.server.server_epochs), EMULATED_EPOCHS))
    return train_and_score(
        z, labels, zv, y[held], x.shape[1], num_classes, epochs, generator, server=spec.server, seed=spec.seed
    )


def _test_inputs(server: ServerConfig) -> str:
    """What an emulated candidate's hold-out accuracy scores: ``clean`` rows (on-device inference) for the
    class-means server (``server-model``), ``sanitized`` releases for the others."""
    return "clean" if server.server_model == "class-means" else "sanitized"


def choose(
    spec: RecipeSpec,
    total: float,
    x: torch.Tensor,
    y: torch.Tensor,
    num_classes: int,
    num_users: int,
    groups: Sequence[int] | np.ndarray,
    candidates: Sequence[Candidate] | None = None,
    repeats: int = 3,
) -> tuple[Scored, list[Scored]]:
    """The candidate with the best emulated public hold-out accuracy at whole-record pure ``total`` per
    user (the mean over ``repeats`` seeded public fitting/hold-out splits by source group, ``groups``
    [n] naming each public document's group, the same splits and maps for every candidate), and every
    candidate's score. Ties go to the earlier candidate. Deterministic for the run's ``seed``.

    ``spec``: the run's release and server sections and seed (:meth:`RecipeSpec.from_config`), to which each
    candidate's keys and its budget split are applied (:meth:`RecipeSpec.with_keys`); ``x``, ``y``: the
    public embeddings and labels; ``num_users``: the run's private users (the emulated population, at most
    ``MAX_EMULATED_USERS``); ``candidates``: the grid (default :func:`default_candidates`)."""
    if len(groups) != int(y.shape[0]):
        raise ValueError(f"groups names {len(groups)} public documents, the embeddings {int(y.shape[0])}")
    grid = list(candidates or default_candidates(num_classes))
    trials = []
    for cand in grid:
        trial = spec.with_keys(cand.keys)
        m_prime = maps.map_dim(trial.release, x.shape[1])
        values = {**dict(cand.keys), **split_budget(trial.release, total, cand.label_share, m_prime, num_classes)}
        trials.append((cand, values, spec.with_keys(values)))
    accs: list[list[float]] = [[] for _ in grid]
    for r in range(repeats):
        gen = torch.Generator().manual_seed(int(spec.seed) * 1000 + r)
        split = _holdout(np.asarray(groups), gen)
        matrices: dict[tuple[Any, ...], torch.Tensor | None] = {}
        public: PublicModel | None = None  # the fitting part's public model, for every class-means candidate
        for i, (_, _, trial) in enumerate(trials):
            if trial.server.server_model == "class-means":
                if public is None:  # fitted on the public stand-in half of the fitting rows
                    half = torch.as_tensor(_halves(split[0])[0])
                    public = fit_public_model(x[half], y[half], num_classes)
                accs[i].append(
                    emulate_class_means(trial.release, x, y, split, public, num_classes, num_users, gen, trial.server)
                )
                continue
            release = trial.release
            key = (release.map_in, release.map_dim, release.map_scale, release.map_seed)
            if key not in matrices:
                matrices[key] = _start_map(release, x[split[0]], y[split[0]], num_classes)
            accs[i].append(emulate(trial, x, y, split, matrices[key], num_classes, num_users, gen))
    table = [
        Scored(cand, values, float(np.mean(a)), {"accuracies": a, "test_inputs": _test_inputs(trial.server)})
        for (cand, values, trial), a in zip(trials, accs, strict=True)
    ]
    if len({s.extra["test_inputs"] for s in table}) > 1:
        raise ValueError("a recipe grid mixes on-device (class-means) and sanitized-input candidates: score them apart")
    best = max(table, key=lambda s: s.accuracy)  # max keeps the first of equal scores
    return best, table
