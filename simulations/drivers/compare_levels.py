"""``sanitas compare`` at the word, document and label levels: every local point at two units.

At the sentence level a user holds one sentence, so the mechanism's unit is the user and compare spends a
whole-record budget per user (:mod:`simulations.drivers.compare_plan`). At the other levels the mechanisms state
their guarantee per unit, and the units a user holds vary:

* word level (Feyisetan et al. 2020, Huang et al. 2024): metric DP per word (epsilon per unit of the word
  space's distance; pure ``epsilon * D`` at its diameter D), one rewrite per document;
* document level (Meehan et al. 2022): SentDP, epsilon per sentence replaced in a document;
* label level: randomized response per label, the embedding released in the clear.

``--epsilons`` are then the mechanism's own epsilons (``word-epsilon``, ``document-epsilon``, ``label-epsilon``),
and each point also carries the **per-user** guarantee it implies: group privacy over the units a user holds
(the mechanism's own composition over a document of k units, ``document_guarantee(k)``: ``k epsilon D`` words,
``epsilon k / 2`` DeepCandidate sentences, ``k epsilon`` truncation sentences), plus the label's epsilon, at the
data's actual maximum over the users (:class:`Units`, counted from each seed's documents), with the distribution
over the users stated. The count of units is released with every report (the ledger's ``num-words`` /
``num-sentences``), so the per-user figure holds between records of the same length; it is not a bound against a
record of another length (:data:`COVERS`).

Labels travel under randomized response at ``--label-epsilon`` (the config's label mechanism where it sets one),
or in the clear with ``--labels-clear`` (an embedding-only series, as at the sentence level). Central DP runs at
the usual grid and at every point's per-user figure that is finite and at most :data:`PER_USER_CAP`; a per-user
figure above the cap is stated as vacuous, never drawn as a guarantee.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from fl import config as config_mod

#: The unit each level's mechanism states its guarantee per.
UNIT = {"word": "word", "document": "sentence", "label": "label"}
#: The config key of each level's epsilon (what ``--epsilons`` sets there).
EPSILON_KEY = {"word": "word-epsilon", "document": "document-epsilon", "label": "label-epsilon"}
#: Per-user epsilons above this are vacuous as a guarantee (e^64 ~ 6e27): no central point is run at them.
PER_USER_CAP = 64.0
#: The labels' epsilon at the word and document levels when neither the config nor ``--label-epsilon`` sets one.
DEFAULT_LABEL_EPSILON = 2.0
#: What a per-user figure covers at each level: the count of units travels with every report.
COVERS = {
    "word": "a user's whole record against any other of as many words (the word count travels with each report, "
    "so records of other lengths are told apart)",
    "document": "a user's whole document against any other of as many sentences (the sentence count travels with "
    "each report, so documents of other lengths are told apart)",
    "label": "nothing of the embedding, which travels in the clear: only the label is protected",
}


def release_level(cfg: Mapping[str, Any]) -> str:
    """The level a comparison's local side releases at: :func:`fl.config.level_of`'s, and ``"label"`` for a
    sentence-level config that privatizes the labels alone (``sentence-mechanism = "none"``)."""
    level = config_mod.level_of(cfg)
    if level == "sentence" and cfg["sentence-mechanism"] == "none" and cfg["label-mechanism"] != "none":
        return "label"
    return level


@dataclass(frozen=True)
class Units:
    """How many units of the level each user of one seed holds: ``train`` (the private users, who release an
    embedding and a label) and ``test`` (the test users, who release an embedding only)."""

    level: str
    train: np.ndarray
    test: np.ndarray

    def distribution(self) -> dict[str, Any]:
        """The counts over every user who releases (training and test users): users, min, median, p90, p99, max."""
        k = np.concatenate([self.train, self.test])
        q = np.percentile(k, [50, 90, 99]) if k.size else [0, 0, 0]
        return {
            "unit": UNIT[self.level],
            "users": int(k.size),
            "min": int(k.min()) if k.size else 0,
            "median": float(q[0]),
            "p90": float(q[1]),
            "p99": float(q[2]),
            "max": int(k.max()) if k.size else 0,
        }


def count_units(texts: Sequence[str], level: str) -> np.ndarray:
    """Each text's units at ``level``: word tokens (the rewrite's units, :func:`fl.cohort.word_counts`), sentences
    (:func:`fl.data.sentences.split_sentences`, as the document level splits them), or one label."""
    if level == "word":
        from fl.cohort import word_counts

        return word_counts(list(texts))
    if level == "document":
        from fl.data.sentences import split_sentences

        return np.fromiter((len(split_sentences(t)) for t in texts), dtype=np.int64, count=len(texts))
    return np.ones(len(texts), dtype=np.int64)


def unit_counts(dataset: Any, level: str) -> Units:
    """The units of every private and test user of a loaded seed (:attr:`simulations.drivers.inputs.RunInputs.dataset`,
    the documents the run partitions: subsampled, public split and short documents already removed)."""
    return Units(level, count_units(dataset.train["text"], level), count_units(dataset.test["text"], level))


@dataclass(frozen=True)
class UnitGuarantee:
    """One local point's guarantee as its mechanism states it, and the whole-record guarantee of k units."""

    level: str
    epsilon: float  # the mechanism's own epsilon (--epsilons)
    text: str  # Guarantee.describe() of one unit
    pure_per_unit: float  # pure epsilon of one unit (at the diameter for a metric guarantee; inf: none)
    whole: Callable[[int], tuple[float, float]]  # k units -> the mechanism's (epsilon, delta) over k units


def unit_guarantee(release: Any, level: str, epsilon: float, num_classes: int) -> UnitGuarantee:
    """The guarantee of ``level``'s mechanism at ``epsilon`` (``release``: the run's release section). The word
    mechanism is built as the run builds it (its vocabulary's diameter); a document mechanism's guarantee depends on
    epsilon and its kind alone, so it is built on a stand-in for the public material it needs (candidates or box)."""
    if level == "word":
        from fl.levels.word.rewrite import word_mechanism

        mech = word_mechanism(replace(release, word_epsilon=float(epsilon)))
        g = mech.guarantee
        return UnitGuarantee(level, epsilon, g.describe(), g.as_ldp()[0], lambda k: mech.document_guarantee(k).as_ldp())
    if level == "document":
        mech = _document_mechanism(release.document_mechanism, float(epsilon))
        g = mech.guarantee
        return UnitGuarantee(level, epsilon, g.describe(), g.as_ldp()[0], lambda k: mech.document_guarantee(k).as_ldp())
    g = replace(release, label_epsilon=float(epsilon)).mechanism("label", num_classes=num_classes).guarantee
    # the embedding is released in the clear: no whole-record bound, whatever the label's epsilon
    return UnitGuarantee(level, epsilon, g.describe(), g.as_ldp()[0], lambda k: (math.inf, 0.0))


def _document_mechanism(name: str, epsilon: float) -> Any:
    """``name`` at ``epsilon`` on stand-in public material (its guarantee does not depend on the material)."""
    import torch

    import mechanisms

    if name == "deepcandidate":
        return mechanisms.create("deepcandidate", epsilon=epsilon, candidates=torch.eye(2, dtype=torch.float64))
    lo, hi = -torch.ones(2, dtype=torch.float64), torch.ones(2, dtype=torch.float64)
    return mechanisms.create(name, epsilon=epsilon, lo=lo, hi=hi)


def per_user(units: Units, guarantee: UnitGuarantee, label_epsilon: float | None) -> dict[str, Any]:
    """The per-user whole-record guarantee of one seed's users: the mechanism's composition over each user's units,
    plus ``label_epsilon`` for the users who release a label (the training users; ``None``: labels in the clear).
    Returns ``epsilon`` (the maximum over the users: the bound every user has), ``delta`` (at that user),
    ``epsilon_median`` and ``epsilon_p90`` over the users, and ``labels``; the figures are infinite when the
    labels or the embedding travel in the clear. Computed per distinct count (a handful), never per user."""
    label = math.inf if label_epsilon is None else float(label_epsilon)
    train = _per_count(units.train, guarantee) + np.array([label, 0.0])[None, :]
    test = _per_count(units.test, guarantee)
    both = np.concatenate([train, test]) if test.size else train
    worst = int(np.argmax(both[:, 0])) if both.size else 0
    eps = both[:, 0]
    # quantiles of an unbounded figure are unbounded (np.percentile would make nan of inf - inf)
    median, p90 = (math.inf, math.inf) if not np.isfinite(eps).all() else (0.0, 0.0)
    if eps.size and np.isfinite(eps).all():
        median, p90 = np.percentile(eps, [50, 90])
    return {
        "epsilon": float(eps[worst]) if eps.size else 0.0,
        "delta": float(both[worst, 1]) if eps.size else 0.0,
        "epsilon_median": float(median),
        "epsilon_p90": float(p90),
        "labels": "in the clear" if label_epsilon is None else f"epsilon {float(label_epsilon):g} per label",
    }


def _per_count(k: np.ndarray, guarantee: UnitGuarantee) -> np.ndarray:
    """``[len(k), 2]``: each user's (epsilon, delta) over its ``k`` units, computed once per distinct count."""
    values, inverse = np.unique(np.asarray(k, dtype=np.int64), return_inverse=True)
    table = np.array([guarantee.whole(int(v)) for v in values], dtype=np.float64).reshape(-1, 2)
    return table[inverse.reshape(-1)] if values.size else np.zeros((0, 2))


def labels_epsilon(cfg: Mapping[str, Any], given: float | None) -> tuple[str, float]:
    """The label mechanism and epsilon of a word- or document-level point: the config's where it protects the
    labels, else randomized response at ``given`` (``--label-epsilon``) or :data:`DEFAULT_LABEL_EPSILON`."""
    if cfg["label-mechanism"] != "none" and given is None:
        return str(cfg["label-mechanism"]), float(cfg["label-epsilon"])
    mechanism = cfg["label-mechanism"] if cfg["label-mechanism"] != "none" else "rr"
    return str(mechanism), float(DEFAULT_LABEL_EPSILON if given is None else given)


def level_points(
    cfg: Mapping[str, Any], level: str, epsilons: Sequence[float], label_epsilon: float | None, labels_clear: bool
) -> list[dict[str, Any]]:
    """The local points' keys at ``level``: the level's epsilon at each of ``epsilons`` with the labels protected
    (:func:`labels_epsilon`), and with ``labels_clear`` the same with the labels in the clear. At the label level
    each point is the label mechanism at that epsilon (the embedding in the clear)."""
    key = EPSILON_KEY[level]
    if level == "label":
        return [{key: float(e)} for e in epsilons]
    mechanism, label = labels_epsilon(cfg, label_epsilon)
    points = []
    for e in epsilons:
        points.append({key: float(e), "label-mechanism": mechanism, "label-epsilon": label})
        if labels_clear:
            points.append({key: float(e), "label-mechanism": "none"})
    return points


def point_label_epsilon(keys: Mapping[str, Any]) -> float | None:
    """A point's labels' epsilon (``None``: in the clear)."""
    return None if keys.get("label-mechanism") == "none" else keys.get("label-epsilon")


@dataclass(frozen=True)
class LevelPlan:
    """What a comparison at the word, document or label level adds to its plan: each seed's unit counts, each
    point's guarantee per unit and per user, and the central targets added at the per-user figures."""

    level: str
    points: list[dict[str, Any]]  # each local point's keys (the same for every seed)
    units: dict[int, Units]
    guarantees: dict[float, UnitGuarantee]  # by the level's epsilon
    per_user: dict[int, list[dict[str, Any]]]  # by seed, one per point
    central_targets: list[float]  # the per-user figures at most PER_USER_CAP (the largest over the seeds)

    def point_figures(self, index: int) -> dict[str, Any]:
        """Point ``index``'s two units, over the seeds: its guarantee per unit, and per user the largest maximum,
        median and p90 over the seeds, each seed's maximum, and whether it is vacuous (above the cap)."""
        keys = self.points[index]
        g = self.guarantees[float(keys[EPSILON_KEY[self.level]])]
        seeds = sorted(self.per_user)
        worst = [self.per_user[s][index] for s in seeds]
        eps = max(w["epsilon"] for w in worst)
        return {
            "unit": UNIT[self.level],
            "unit_epsilon": g.epsilon,
            "unit_guarantee": g.text,
            "unit_pure_epsilon": g.pure_per_unit,
            "per_user_epsilon": eps,
            "per_user_delta": max(w["delta"] for w in worst),
            "per_user_epsilon_median": max(w["epsilon_median"] for w in worst),
            "per_user_epsilon_p90": max(w["epsilon_p90"] for w in worst),
            "per_user_epsilon_by_seed": {str(s): w["epsilon"] for s, w in zip(seeds, worst, strict=True)},
            "per_user_vacuous": not eps <= PER_USER_CAP,
            "labels": worst[0]["labels"],
        }

    def document(self) -> dict[str, Any]:
        """What compare.json records of the level: the unit, every seed's counts, each point's two units."""
        return {
            "level": self.level,
            "unit": UNIT[self.level],
            "per_user_cap": PER_USER_CAP,
            "per_user_covers": COVERS[self.level],
            "units_by_seed": {str(s): u.distribution() for s, u in self.units.items()},
            "points": [{"keys": keys, **self.point_figures(i)} for i, keys in enumerate(self.points)],
            "central_at_per_user": self.central_targets,
        }


def build_level_plan(
    cfg: config_mod.RunConfig,
    level: str,
    epsilons: Sequence[float],
    label_epsilon: float | None,
    labels_clear: bool,
    datasets: Mapping[int, Any],
    num_classes: int,
) -> LevelPlan:
    """The level's points, each seed's unit counts (``datasets``: each seed's loaded documents) and each point's
    per-unit and per-user figures; the central targets at the per-user figures that are finite and at most
    :data:`PER_USER_CAP`."""
    points = level_points(cfg, level, epsilons, label_epsilon, labels_clear)
    units = {s: unit_counts(ds, level) for s, ds in datasets.items()}
    guarantees = {float(e): unit_guarantee(cfg.release, level, float(e), num_classes) for e in epsilons}
    key = EPSILON_KEY[level]
    per = {
        s: [per_user(u, guarantees[float(p[key])], point_label_epsilon(p)) for p in points] for s, u in units.items()
    }
    plan = LevelPlan(level, points, units, guarantees, per, [])
    targets = []
    for i in range(len(points)):
        eps = plan.point_figures(i)["per_user_epsilon"]
        if math.isfinite(eps) and eps <= PER_USER_CAP:
            targets.append(float(f"{eps:.6g}"))
    return replace(plan, central_targets=sorted(set(targets)))


def print_level_plan(plan: LevelPlan) -> None:
    """The two units of every point, before anything runs."""
    unit = UNIT[plan.level]
    for s, u in plan.units.items():
        d = u.distribution()
        print(
            f"sanitas: seed {s}: {unit}s per user over {d['users']} users: median {d['median']:g}, p90 {d['p90']:g}, "
            f"max {d['max']}",
            flush=True,
        )
    for i in range(len(plan.points)):
        f = plan.point_figures(i)
        vacuous = f" (above {PER_USER_CAP:g}: vacuous as a per-user bound)" if f["per_user_vacuous"] else ""
        print(
            f"sanitas: {EPSILON_KEY[plan.level]} {f['unit_epsilon']:g}: per {unit}: {f['unit_guarantee']}; per user "
            f"(labels {f['labels']}): max {f['per_user_epsilon']:.4g}, median {f['per_user_epsilon_median']:.4g}"
            f"{vacuous}",
            flush=True,
        )


def check_level_side(
    cfg: config_mod.RunConfig, level: str, label_share: float | str, label_epsilon: Any, central_trains: Sequence[str]
) -> None:
    """What compare refuses at the word, document and label levels, before any data is read: a numeric
    ``--label-share`` (no budget is split there: the labels' epsilon is ``--label-epsilon``), ``--label-epsilon``
    where the labels are the level, ``map-in = "leaky"`` (no local guarantee to state per unit or per user), and an
    encoder trained centrally over documents embedded as the mean of their sentences."""
    if label_share != "auto":
        raise config_mod.ConfigError(
            f"--label-share {label_share:g} splits a whole-record budget at the sentence level; this config releases "
            f"at the {level} level, where --epsilons are {EPSILON_KEY[level]}s: give --label-epsilon instead"
        )
    if level == "label" and label_epsilon is not None:
        raise config_mod.ConfigError(
            "--label-epsilon: this config releases the labels alone, and --epsilons are its label epsilons: remove it"
        )
    if cfg["map-in"] == "leaky":
        raise config_mod.ConfigError(
            f"map-in = 'leaky' sends M1's gradients unsanitized, so the {level} level's points have no local guarantee "
            "to state per unit or per user: use map-in = 'identity' or 'projection'"
        )
    if "encoder" in central_trains and cfg["doc-embedding"] != "whole":
        raise config_mod.ConfigError(
            f"--central-trains encoder tunes the encoder on whole documents; this config embeds them as the mean of "
            f"their sentences (doc-embedding = {cfg['doc-embedding']!r}): use --central-trains head"
        )


def reference_resets(cfg: Mapping[str, Any], level: str) -> list[tuple[str, str]]:
    """The keys (and TOML values) that turn the level's mechanism off in a noise-free reference and on the central
    side: ``word-mechanism`` / ``document-mechanism`` ``"none"``, their options cleared where set."""
    if level not in ("word", "document"):
        return []
    out = [(f"{level}-mechanism", '"none"')]
    if cfg[f"{level}-options"]:
        out.append((f"{level}-options", '""'))
    return out


#: compare.csv's further columns at the word, document and label levels: each point's two units.
LEVEL_COLUMNS = (
    "unit",
    "unit_epsilon",
    "unit_guarantee",
    "unit_pure_epsilon",
    "labels",
    "per_user_epsilon",
    "per_user_delta",
    "per_user_epsilon_median",
    "per_user_epsilon_p90",
    "per_user_vacuous",
    "per_user_check",
)


def _same(a: Any, b: Any) -> bool:
    """Two run-config values equal as a grid writes them (numbers to 6 significant digits)."""
    if isinstance(a, int | float) and isinstance(b, int | float) and not isinstance(a, bool):
        return math.isclose(float(a), float(b), rel_tol=1e-5)
    return str(a) == str(b)


def point_index(plan: LevelPlan, values: Mapping[str, Any]) -> int | None:
    """The index of the local point a run's grid values are a run of (``None``: not a local point)."""
    for i, keys in enumerate(plan.points):
        if all(k in values and _same(values[k], v) for k, v in keys.items()):
            return i
    return None


def annotate_rows(rows: Sequence[dict[str, Any]], runs: Mapping[str, Any], plan: LevelPlan) -> None:
    """Each local row's per-user figure computed from its seed's unit counts (``per_user_planned``), checked
    against the figure the run's own ledger printed: the whole-record epsilon where the labels are protected, the
    embedding-only one where they travel in the clear (``per_user_check``)."""
    key = EPSILON_KEY[plan.level]
    for row in rows:
        run = runs.get(row.get("run_name", ""))
        i = None if run is None or not row["series"].startswith("local-") else point_index(plan, run.values)
        if i is None or run.seed not in plan.units:
            continue
        keys = plan.points[i]
        figures = plan.per_user[run.seed][i]
        row["point_index"] = i
        row["per_user_planned"] = figures["epsilon"]
        if row["series"].startswith("local-shuffled"):
            continue  # a shuffled figure is another notion: nothing to check it against here
        label = point_label_epsilon(keys)
        printed = row.get("epsilon") if label is not None else row.get("epsilon_embedding_only")
        expected = (
            figures["epsilon"]
            if label is not None
            else per_user(plan.units[run.seed], plan.guarantees[float(keys[key])], 0.0)["epsilon"]
        )
        if printed is None or expected is None or not math.isfinite(expected):
            row["per_user_check"] = "no finite figure to check" if printed is None else "unbounded from the counts"
        elif math.isclose(float(printed), float(expected), rel_tol=1e-6):
            row["per_user_check"] = "the run's ledger prints the figure of the unit counts"
        else:
            row["per_user_check"] = f"DIFFERS: the run's ledger {float(printed):.6g}, the unit counts {expected:.6g}"


def annotate_points(points: Sequence[dict[str, Any]], rows: Sequence[Mapping[str, Any]], plan: LevelPlan) -> None:
    """Each local point's two units (:meth:`LevelPlan.point_figures`) and its seeds' checks, joined."""
    by_run = {(r["run_name"], r["series"]): r for r in rows if r.get("run_name")}
    for p in points:
        if not str(p["series"]).startswith("local-"):
            continue
        members = [by_run.get((name, p["series"])) for name in str(p.get("runs") or "").split()]
        members = [m for m in members if m is not None]
        index = {m.get("point_index") for m in members} - {None}
        if len(index) != 1:
            continue
        p.update(plan.point_figures(int(index.pop())))
        checks = sorted({str(m["per_user_check"]) for m in members if m.get("per_user_check")})
        p["per_user_check"] = "; ".join(checks) or None
