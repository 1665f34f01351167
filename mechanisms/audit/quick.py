"""A mechanism checked against its declared guarantee: :func:`audit_declared`, the audit the built-in
mechanisms pass (:func:`mechanisms.audit.audit_mechanism`; tests/mechanisms/test_audit.py and
test_audit_levels.py) run on a user's mechanism, quickly before a run does any work
(``simulations.runtime.user_mechanisms``) and in full by ``sanitas audit-mechanism``.

What is audited, per level: a sentence mechanism on the pair (x, -x) at input dimension 2, where that pair
is the tightest for the sphere mechanisms, and at the run's dimension (each one the mechanism accepts); a
label mechanism on labels (0, 1) of 2, 4 and 20 classes (:data:`LABEL_CLASSES`, those it takes); a word
mechanism on its space's farthest pair of words (its noisy
vector when it has ``perturb``); a document mechanism on :func:`mechanisms.audit.document_pair`.

Guarantee (the false-refusal rate): the k audits of a mechanism run at alpha / k each (Bonferroni), so a
mechanism that meets its declared guarantee on the audited pairs is refused with probability at most
``alpha`` (:data:`QUICK_ALPHA` = 0.001 by default) over the audit's samples. The seed is fixed
(:data:`QUICK_SEED`) and the number of samples is one of :data:`QUICK_LADDER`: the same mechanism on the
same ladder step gets the same verdict on every run.

Power (tests/mechanisms/test_user_mechanisms.py is the power check): at 2e5 releases per input, a copy of
planar Laplace or of randomized response that samples at 3x its declared epsilon is refused (measured lower
bound 2.27x and 2.98x the declared epsilon at epsilon 1), and the honest copies pass (0.88x and 0.99x). The
bound cannot exceed about log(N / log(4 T / alpha)) (9.6 at N = 2e5: docs/SPEC.md §15.6), so a large declared
epsilon is audited at a smaller one too (``simulations.runtime.user_mechanisms``). A pass is a sanity check, not a
proof: the audit tests one pair and one family of events (the module docstring of
:mod:`mechanisms.audit`), and it says so in its line when it cannot test a mechanism at all.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

from mechanisms.audit import audit_mechanism, document_pair
from mechanisms.audit.statistics import DEFAULT_CHUNK, AuditResult

from ..base import Mechanism
from ..user_code import short

#: The run's check refuses an honest mechanism with probability at most this (see the module docstring).
QUICK_ALPHA = 1e-3
#: The audit's seed: a verdict is a deterministic function of the mechanism and the number of samples.
QUICK_SEED = 0
#: Releases per input of each audit, largest first: the quick audit takes the largest step that fits
#: :data:`QUICK_SECONDS` on this machine (timed on a probe); under the last step it tests nothing, and says so.
QUICK_LADDER = (200_000, 50_000, 20_000)
#: Seconds the quick audit of one config may take on its mechanisms' sampling (the run's check splits them).
QUICK_SECONDS = 20.0
#: The label classes a label mechanism is audited at: the binary pair, and K = 4 and 20 (AG News, 20 Newsgroups),
#: where a K-ary mechanism that keeps a label with the binary probability releases at a larger epsilon.
LABEL_CLASSES = (2, 4, 20)
#: Releases per input of the largest timing probe (:func:`_affordable`).
PROBE_SAMPLES = 16_384


@dataclass(frozen=True)
class Verdict:
    """The outcome of :func:`audit_declared`.

    ``status``: ``"pass"`` (no audit refuted the declared guarantee), ``"fail"`` (one did: its lower bound
    exceeds the declared epsilon of the pair) or ``"untested"`` (``reason`` says why nothing could be
    tested). ``results``: one :class:`AuditResult` per audit run; ``alpha``: the false-refusal rate of all of
    them together; ``seconds``: wall time of the whole check, probes included.
    """

    status: str
    results: tuple[AuditResult, ...]
    alpha: float
    seconds: float
    reason: str = ""

    @property
    def passed(self) -> bool:
        return self.status == "pass"

    @property
    def failed(self) -> bool:
        return self.status == "fail"

    @property
    def worst(self) -> AuditResult | None:
        """The audit whose lower bound comes closest to (or goes farthest past) its declared epsilon."""
        scored = [r for r in self.results if r.claimed_epsilon]
        return max(scored, key=lambda r: r.epsilon_lb / float(r.claimed_epsilon or 1.0), default=None)

    def line(self, what: str) -> str:
        """One line about ``what`` (e.g. ``"sentence-mechanism 'loose.py:Loose'"``): a refusal names the
        estimate, the declared epsilon and the fix."""
        if self.status == "untested":
            return f"{what} was not audited: {self.reason}"
        worst = self.worst
        assert worst is not None and worst.claimed_epsilon is not None
        declared = f"{worst.claimed_epsilon:.3g}"
        if worst.pair_distance is not None and worst.guarantee and worst.guarantee.get("epsilon"):
            declared = f"{worst.guarantee['epsilon']:g}*d = {declared}"  # a metric guarantee: eps * d(x, x')
        confidence = f"{1 - self.alpha:.1%} confidence"
        if self.failed:
            return (
                f"{what} failed its audit: declared epsilon {declared}, lower bound {worst.epsilon_lb:.3g} "
                f"({confidence}): fix the sampler or the guarantee"
            )
        passed = (
            f"{what} passed its privacy audit: measured lower bound {worst.epsilon_lb:.3g} <= declared epsilon "
            f"{declared} ({confidence}, {_where(worst)}, {worst.num_samples} releases per input, {self.seconds:.1f} s)"
        )
        return f"{passed}; {self.reason}" if self.reason else passed


def _where(result: AuditResult) -> str:
    """The audited pair in a few words."""
    if result.level == "sentence":
        return f"dim {result.input_dim}"
    if result.level == "label":
        return f"labels 0, 1 of {result.num_classes}"
    if result.level == "word" and result.words:
        return f"words {result.words[0]!r}, {result.words[1]!r}"
    return f"{result.level} pair"


def audit_declared(
    mech: Mechanism | Sequence[Mechanism],
    *,
    dims: Sequence[int] = (2,),
    samples: Sequence[int] = QUICK_LADDER,
    seconds: float | None = QUICK_SECONDS,
    alpha: float = QUICK_ALPHA,
    seed: int = QUICK_SEED,
) -> Verdict:
    """Audit ``mech`` against its own declared guarantee (see the module docstring for what, and how sure);
    several builds of one mechanism (e.g. at two epsilons) are audited together, ``alpha`` covering them all.

    ``dims``: the sentence level's input dimensions (each one the mechanism's ``sanitize`` accepts is audited;
    a ``ValueError`` on all of them is raised); ``samples``: releases per input, largest first, the largest
    whose run is projected to fit ``seconds`` (``None``: no limit, the first); ``alpha``: the false-refusal
    rate of the whole check. Raises ``ValueError`` (one line) when the mechanism fails while audited.
    """
    started = time.perf_counter()

    def untested(reason: str) -> Verdict:
        return Verdict("untested", (), alpha, time.perf_counter() - started, reason)

    builds = [mech] if isinstance(mech, Mechanism) else list(mech)
    guarantee = builds[0].guarantee
    if not guarantee.is_private:
        return untested("it declares no privacy (epsilon = inf): there is nothing to audit")
    if guarantee.is_vacuous:
        return untested(f"its delta {guarantee.delta:g} is about 1, which every mechanism meets")
    with _one_thread():
        try:
            plans = [plan for build in builds for plan in _plans(build, dims)]
        except _Untestable as why:
            return untested(str(why))
        budget = None if seconds is None else seconds / len(plans)
        results = []
        for audited, plan in plans:
            try:
                n = samples[0] if budget is None else _affordable(audited, plan, samples, budget, seed)
                if n is None:
                    return untested(
                        f"an audit of {samples[-1]} releases per input would take over {budget:.0f} s here; "
                        "run sanitas audit-mechanism for the full audit"
                    )
                result = audit_mechanism(audited, n, seed=seed, alpha=alpha / len(plans), **plan)  # Bonferroni
            except Exception as err:  # noqa: BLE001 - the user's sampler failed: one line, not a traceback
                raise ValueError(f"it failed while audited: {type(err).__name__}: {short(str(err), 80)}") from None
            if result.claimed_epsilon is None or not math.isfinite(result.claimed_epsilon):
                stated = audited.guarantee
                notion = f"metric {stated.metric!r} on an unbounded domain" if stated.notion == "metric" else ""
                return untested(f"its guarantee ({notion or stated.notion}) states no finite epsilon for the pair")
            results.append(result)
    if any(not r.consistent for r in results):
        return Verdict("fail", tuple(results), alpha, time.perf_counter() - started)
    if all(float(r.claimed_epsilon or 0.0) >= measurable(r) for r in results):  # a pass would say nothing
        top = min(results, key=measurable)
        return untested(
            f"its declared epsilon {top.claimed_epsilon:.3g} for the pair is beyond the {measurable(top):.3g} that "
            f"{top.num_samples} releases per input can measure: audit it at a smaller epsilon"
        )
    beyond = [r for r in results if float(r.claimed_epsilon or 0.0) >= measurable(r)]
    note = (
        f"declared epsilon {beyond[0].claimed_epsilon:.3g} is beyond what the audit can measure: tested at the "
        "smaller epsilons only"
        if beyond
        else ""
    )
    return Verdict("pass", tuple(results), alpha, time.perf_counter() - started, note)


def measurable(result: AuditResult) -> float:
    """The largest epsilon an audit of ``result``'s size can certify, log(N / log(4 T / alpha)): no event rarer
    than about log(4 T / alpha) / N under the negative input is certified (docs/SPEC.md §15.6). A declared
    epsilon at or above it cannot be refuted, whatever the sampler does."""
    return math.log(result.num_samples / math.log(4 * result.num_thresholds / result.alpha))


def _takes_classes(mech: Mechanism, k: int) -> bool:
    """Whether the label mechanism releases labels of ``k`` classes (one built for a fixed K may not)."""
    try:
        mech.sanitize(torch.zeros(4, dtype=torch.long), num_classes=k, generator=torch.Generator().manual_seed(0))  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - a mechanism for another K: audited at the K it takes
        return False
    return True


class _Untestable(Exception):
    """The level's audit cannot run on this mechanism; the message says why."""


def _plans(mech: Mechanism, dims: Sequence[int]) -> list[tuple[Mechanism, dict[str, Any]]]:
    """The audits of ``mech``: the mechanism each one samples and its ``audit_mechanism`` keyword arguments.
    Raises :class:`_Untestable` when the level's audit needs what the mechanism does not expose,
    ``ValueError`` when its ``sanitize`` fails on every sentence dimension."""
    if mech.level == "word":
        if not (hasattr(mech, "input_vectors") and (hasattr(mech, "perturb") or hasattr(mech, "sanitize_ids"))):
            raise _Untestable(
                "the word audit needs input_vectors() and perturb() or sanitize_ids() (as the built-in word "
                "mechanisms have, e.g. by subclassing mechanisms.words.CMP)"
            )
    elif mech.level == "document":
        try:
            document_pair(mech)
        except ValueError as err:
            raise _Untestable(f"{err} (the document audit needs public lo/hi or candidates)") from None
    if mech.level == "label":  # K-ary mechanisms err at K > 2 as often as at 2 (binary RR rates at K = 4)
        return [(mech, {"num_classes": k}) for k in LABEL_CLASSES if k == 2 or _takes_classes(mech, k)]
    if mech.level != "sentence":
        return [(mech, {})]
    plans, refusal = [], None
    for dim in dict.fromkeys(int(d) for d in dims):  # in order, once each
        # A copy per dimension: a mechanism may set itself up for the first dimension it sees (PrivUnit, PrivEmb).
        audited = _fresh(mech)
        probe = torch.ones(1, dim, dtype=torch.float64) / math.sqrt(dim)
        try:
            audited.sanitize(probe, generator=torch.Generator().manual_seed(0))  # type: ignore[attr-defined]
        except Exception as err:  # noqa: BLE001 - a dimension it refuses (a projection built for another one)
            refusal = f"its sanitize failed on a [1, {dim}] input: {type(err).__name__}: {err}"
            continue
        # Rows per sampler call: about 2 million numbers, whatever the dimension (memory stays small).
        plans.append((audited, {"dim": dim, "chunk_size": max(1024, min(DEFAULT_CHUNK, 2**21 // dim))}))
    if not plans:
        raise ValueError(refusal or "no input dimension to audit")
    return plans


def _fresh(mech: Mechanism) -> Mechanism:
    """A copy of ``mech`` as built (``mech`` itself when it cannot be copied)."""
    try:
        return copy.deepcopy(mech)
    except Exception:  # noqa: BLE001 - an attribute that does not copy (a lock, a file): audit the one given
        return mech


def _affordable(mech: Mechanism, plan: dict[str, Any], samples: Sequence[int], budget: float, seed: int) -> int | None:
    """The largest of ``samples`` whose audit is projected to take at most ``budget`` seconds; ``None`` when
    none fits. Timed on probes of 256, 2048 and :data:`PROBE_SAMPLES` releases after an untimed warm-up that
    pays the one-time costs (a word space loads, kernels compile), each probe only while the next one is
    projected to take at most a quarter of ``budget`` (a slow mechanism costs little to find slow)."""
    audit_mechanism(mech, 16, seed=seed, **plan)
    n, taken = 256, _timed(mech, plan, 256, seed)
    while n < PROBE_SAMPLES and taken * 8 <= budget / 4:
        n *= 8
        taken = _timed(mech, plan, n, seed)
    per_sample = taken / n  # with the audit's fixed costs spread over n: an overestimate at larger counts
    return next((count for count in samples if count * per_sample <= budget), None)


def _timed(mech: Mechanism, plan: dict[str, Any], n: int, seed: int) -> float:
    started = time.perf_counter()
    audit_mechanism(mech, n, seed=seed, **plan)
    return time.perf_counter() - started


@contextmanager
def _one_thread() -> Iterator[None]:
    """torch on one thread (restored after): on a busy machine its thread pool makes the samplers many times
    slower and their timing erratic (tests/mechanisms/test_audit_levels.py), and one thread is one core."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
