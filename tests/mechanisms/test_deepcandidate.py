"""Statistical tests of DeepCandidate / M_TD (docs/SPEC.md §11.4, items 1-5, plus the contract).

Each privacy or sampling test has a power check: a deliberately wrong
mechanism (another V for the neighbour, exp(eps u) instead of exp(eps u / 2),
a sampler at the wrong temperature) must fail it.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats

import mechanisms
from mechanisms.base import DocumentMechanism
from mechanisms.deepcandidate import (
    DeepCandidate,
    deep_candidate_probability,
    exponential_log_probs,
    random_directions,
    utilities_from_projections,
)

EPSILONS = (0.1, 1.0, 3.0, 10.0, 1000.0)
D = 8
P = 16
NUM_PAIRS = 10_000


def _candidates(seed: int = 0) -> torch.Tensor:
    """Candidates: the points c * e_a (c in {-2, -1, 1, 2}) and 0, whose projections sentences can
    tie *exactly* (one nonzero product per dot product), and 87 Gaussian points near the origin."""
    g = torch.Generator().manual_seed(seed)
    axis = torch.cat([c * torch.eye(D, dtype=torch.float64) for c in (-2.0, -1.0, 1.0, 2.0)])
    axis = torch.cat([axis, torch.zeros(1, D, dtype=torch.float64)])
    return torch.cat([axis, 0.5 * torch.randn(87, D, generator=g, dtype=torch.float64)])


NUM_AXIS = 4 * D + 1  # the first rows of _candidates() are the tie points


def _brute_utilities(doc: torch.Tensor, cand: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Alg. 1 written out: the m x k x p comparison tensor (small inputs only)."""
    ps, pf = doc.double() @ v.T, cand.double() @ v.T
    h = (ps[None, :, :] >= pf[:, None, :]).sum(1)
    return -(h - doc.shape[0] / 2).abs().amax(1)


def _neighbour_pairs(cand: torch.Tensor, n: int, seed: int = 1) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """n pairs (x, x') with the same k in 2..12 that differ in sentence l.

    Replacement kinds, in turn: a fresh Gaussian sentence; a huge one (norm ~1e300); a
    candidate tie point (exact ties on all projections); -s_l; a copy of another sentence;
    the zero vector (ties the zero candidate). A third of the x also hold a tie point.
    """
    g = torch.Generator().manual_seed(seed)
    ks = torch.randint(2, 13, (n,), generator=g).tolist()
    picks = torch.randint(0, 2**31, (n, 3), generator=g).tolist()
    docs, nbrs = [], []
    for t, (k, (a, b, c)) in enumerate(zip(ks, picks, strict=True)):
        x = torch.randn(k, D, generator=g, dtype=torch.float64)
        if t % 3 == 0:
            x[c % k] = cand[a % NUM_AXIS]
        y, row, kind = x.clone(), b % k, t % 6
        if kind == 0:
            y[row] = torch.randn(D, generator=g, dtype=torch.float64)
        elif kind == 1:
            y[row] = 1e300 * torch.randn(D, generator=g, dtype=torch.float64) / math.sqrt(D)
        elif kind == 2:
            y[row] = cand[a % NUM_AXIS]
        elif kind == 3:
            y[row] = -x[row]
        elif kind == 4:
            y[row] = x[(row + 1) % k]
        else:
            y[row] = 0.0
        docs.append(x)
        nbrs.append(y)
    return docs, nbrs


@pytest.fixture(scope="module")
def fuzz() -> dict[str, torch.Tensor]:
    """Utilities of 10^4 neighbour pairs under V, and of the neighbours under another V (power)."""
    cand = _candidates()
    docs, nbrs = _neighbour_pairs(cand, NUM_PAIRS)
    mech = DeepCandidate(1.0, cand, num_projections=P, projection_seed=3)
    other_v = DeepCandidate(1.0, cand, num_projections=P, projection_seed=4)
    return {
        "u": mech.batch_utilities(docs),
        "u_nbr": mech.batch_utilities(nbrs),
        "u_nbr_other_v": other_v.batch_utilities(nbrs),
    }


# ---------------------------------------------------------------------------------- correctness
def test_utilities_match_algorithm_1_brute_force() -> None:
    """The count/cumsum/gather computation equals Alg. 1's comparisons, ties and k = 2..15 included.
    Catches a wrong tie rule (> instead of >=), an off-by-one in the ranks, a wrong k/2."""
    cand = _candidates()
    docs, nbrs = _neighbour_pairs(cand, 300, seed=5)
    mech = DeepCandidate(1.0, cand, num_projections=P, projection_seed=3)
    for batch in (docs, nbrs):
        got = mech.batch_utilities(batch)
        want = torch.stack([_brute_utilities(x, cand, mech.directions) for x in batch])
        assert torch.equal(got, want)
    assert got.min() < -2 and got.max() >= -0.5  # deep and shallow candidates both occur


@pytest.mark.parametrize(("k", "m", "p", "d"), [(3000, 300, 20, 4), (33_000, 10, 3, 2)])
def test_long_documents_match_brute_force(k: int, m: int, p: int, d: int) -> None:
    """Long documents (int16 counts; int32 beyond 2^15 sentences) give Alg. 1's utilities."""
    g = torch.Generator().manual_seed(k)
    cand = 0.05 * torch.randn(m, d, generator=g)
    doc = torch.randn(k, d, generator=g)
    mech = DeepCandidate(2.0, cand, num_projections=p, projection_seed=1)
    assert torch.equal(mech.utilities(doc), _brute_utilities(doc, cand, mech.directions))


# --------------------------------------------------------------------- docs/SPEC.md §11.4 item 1
def test_sensitivity_fuzz_at_most_one(fuzz: dict[str, torch.Tensor]) -> None:
    """max_i |u(x, f_i) - u(x', f_i)| <= 1 over 10^4 neighbour pairs with adversarial replacements
    (huge norm, exact ties with a candidate, -s_l, duplicates, zero), the same V; 1 is attained."""
    diff = (fuzz["u"] - fuzz["u_nbr"]).abs().amax(1)
    assert float(diff.max()) == 1.0
    assert float((diff == 1.0).float().mean()) > 0.1


def test_sensitivity_fuzz_has_power(fuzz: dict[str, torch.Tensor]) -> None:
    """Evaluating x' with another V (V not independent of the pair) breaks the bound."""
    assert float((fuzz["u"] - fuzz["u_nbr_other_v"]).abs().amax(1).max()) > 1.0


def test_sensitivity_with_exact_ties_on_an_integer_grid() -> None:
    """Projections on a small integer grid make ties the rule (most comparisons are ties or near);
    replacements by a candidate's own projections, by +-inf and by the negation keep |du| <= 1."""
    g = torch.Generator().manual_seed(7)
    m, p = 60, 5
    cand = torch.randint(-3, 4, (m, p), generator=g).double()
    ks = torch.randint(2, 10, (NUM_PAIRS,), generator=g).tolist()
    rows = torch.randint(0, 2**31, (NUM_PAIRS, 2), generator=g).tolist()
    docs, nbrs = [], []
    for t, (k, (a, b)) in enumerate(zip(ks, rows, strict=True)):
        x = torch.randint(-3, 4, (k, p), generator=g).double()
        y, row = x.clone(), b % k
        y[row] = [
            cand[a % m],
            torch.full((p,), math.inf),
            torch.full((p,), -math.inf),
            -x[row],
            torch.randint(-3, 4, (p,), generator=g).double(),
        ][t % 5]
        docs.append(x)
        nbrs.append(y)
    u, u_nbr = utilities_from_projections(docs, cand), utilities_from_projections(nbrs, cand)
    assert float((u - u_nbr).abs().max()) == 1.0
    ties = torch.stack([(x[:, None, :] == cand[None]).float().mean() for x in docs[:200]]).mean()
    assert ties > 0.1


# --------------------------------------------------------------------- docs/SPEC.md §11.4 item 2
@pytest.mark.parametrize("eps", EPSILONS)
def test_exact_privacy_loss_at_most_epsilon(fuzz: dict[str, torch.Tensor], eps: float) -> None:
    """max_i |log P_x(i) - log P_x'(i)| <= eps + 1e-9 on every pair, and more than eps/2 on some
    (the check is not vacuous)."""
    loss = (exponential_log_probs(fuzz["u"], eps) - exponential_log_probs(fuzz["u_nbr"], eps)).abs().amax(1)
    assert float(loss.max()) <= eps + 1e-9
    assert float(loss.max()) > eps / 2


@pytest.mark.parametrize("eps", EPSILONS)
def test_privacy_loss_check_has_power(fuzz: dict[str, torch.Tensor], eps: float) -> None:
    """exp(eps * u) (the exponential mechanism without the 1/2) exceeds eps on some pair."""
    wrong = exponential_log_probs(fuzz["u"], 2 * eps) - exponential_log_probs(fuzz["u_nbr"], 2 * eps)
    assert float(wrong.abs().max()) > eps + 1e-9


@pytest.mark.parametrize("eps", [0.01, 1.0, 1000.0])
def test_log_probs_are_the_normalised_exponential_mechanism(eps: float) -> None:
    """log_probs is float64, sums to one in log space, and equals log softmax(eps u / 2)."""
    cand = _candidates()
    mech = DeepCandidate(eps, cand, num_projections=P, projection_seed=3)
    doc = torch.randn(9, D, generator=torch.Generator().manual_seed(0))
    lp = mech.log_probs(doc)
    assert lp.dtype == torch.float64 and lp.shape == (cand.shape[0],)
    assert abs(float(lp.logsumexp(0))) < 1e-12 and bool(torch.isfinite(lp).all())
    u = mech.utilities(doc)
    assert torch.allclose(lp, torch.log_softmax(eps * u / 2, 0), atol=1e-12, rtol=0)


# --------------------------------------------------------------------- docs/SPEC.md §11.4 item 3
def _chi_square_p(mech: DeepCandidate, doc: torch.Tensor, probs: np.ndarray, n: int = 100_000) -> float:
    gen = torch.Generator().manual_seed(11)
    idx = mech.sanitize([doc] * n, generator=gen)
    counts = np.bincount(idx.numpy(), minlength=probs.size)
    return stats.chisquare(counts, n * probs).pvalue


@pytest.fixture(scope="module")
def chi_setup() -> tuple[torch.Tensor, torch.Tensor, np.ndarray]:
    g = torch.Generator().manual_seed(2)
    cand = 0.4 * torch.randn(50, 6, generator=g)
    doc = torch.randn(8, 6, generator=g)
    mech = DeepCandidate(1.5, cand, num_projections=10, projection_seed=0)
    probs = mech.log_probs(doc).exp().numpy()
    probs /= probs.sum()
    assert len(set(mech.utilities(doc).tolist())) >= 3 and 100_000 * probs.min() > 5
    return cand, doc, probs


def test_sampler_matches_log_probs_chi_square(chi_setup) -> None:
    """10^5 releases of one document (m = 50) follow exp(log_probs): chi-square p > 1e-3."""
    cand, doc, probs = chi_setup
    mech = DeepCandidate(1.5, cand, num_projections=10, projection_seed=0)
    assert _chi_square_p(mech, doc, probs) > 1e-3


def test_sampler_chi_square_has_power(chi_setup) -> None:
    """Sampling at temperature eps u (twice the right one) is rejected, already with 2 * 10^4 draws."""
    cand, doc, probs = chi_setup
    wrong = DeepCandidate(3.0, cand, num_projections=10, projection_seed=0)
    assert _chi_square_p(wrong, doc, probs, n=20_000) < 1e-6


# --------------------------------------------------------------------- docs/SPEC.md §11.4 item 4
TABLE_1 = [(3.0, 55, 5, 0.9526), (6.0, 25, 3, 0.9760), (10.0, 5, 2, 0.9566), (23.0, 1, 1, 0.9518)]


@pytest.mark.parametrize(("eps", "b", "depth", "expected"), TABLE_1)
def test_table_1_probabilities(eps: float, b: int, depth: int, expected: float) -> None:
    """Paper Table 1: m = 5000, b candidates at depth j*, the rest at depth 0 -> P[deep] to 4 decimals.

    Depth j is the main-text utility min_j min(h_j, k - h_j); the mechanism's utility is
    u = j - k/2, and the shift cancels: same number for every k >= 2 j*.
    """
    for k in (2 * depth, 2 * depth + 1, 20):
        prob = deep_candidate_probability(eps, 5000, b, depth, num_sentences=k)
        assert round(prob, 4) == expected
    assert expected >= 0.95


@pytest.mark.parametrize(("eps", "b", "depth", "expected"), TABLE_1)
def test_table_1_check_has_power(eps: float, b: int, depth: int, expected: float) -> None:
    """exp(eps u) instead of exp(eps u / 2) does not reproduce Table 1."""
    assert round(deep_candidate_probability(2 * eps, 5000, b, depth), 4) != expected


# --------------------------------------------------------------------- docs/SPEC.md §11.4 item 5
@pytest.fixture(scope="module")
def document_pairs() -> dict[int, tuple[torch.Tensor, torch.Tensor]]:
    """For k in (4, 10, 16): utilities of 300 pairs of unrelated documents of k sentences; half of
    the x' lie far from the candidates, so that every candidate is shallow for them."""
    g = torch.Generator().manual_seed(9)
    cand = 0.3 * torch.randn(200, D, generator=g)
    mech = DeepCandidate(1.0, cand, num_projections=P, projection_seed=5)
    out = {}
    for k in (4, 10, 16):
        xs = [torch.randn(k, D, generator=g) for _ in range(300)]
        ys = [torch.randn(k, D, generator=g) + (6.0 if t % 2 else 0.0) for t in range(300)]
        out[k] = (mech.batch_utilities(xs), mech.batch_utilities(ys))
    return out


@pytest.mark.parametrize("eps", [0.5, 1.0, 5.0])
def test_whole_document_bound(document_pairs, eps: float) -> None:
    """Replacing all k sentences costs at most eps k / 2 (docs/SPEC.md §8.5), and more than eps for k = 10,
    16: the per-sentence epsilon does not cover whole documents."""
    mech = DeepCandidate(eps, torch.randn(2, D, generator=torch.Generator().manual_seed(17)), num_projections=P)
    for k, (u, u_other) in document_pairs.items():
        loss = (exponential_log_probs(u, eps) - exponential_log_probs(u_other, eps)).abs().amax(1).max()
        assert mech.document_guarantee(k).epsilon == eps * k / 2
        assert float(loss) <= eps * k / 2 + 1e-9
        if k >= 10:
            assert float(loss) > eps


# ---------------------------------------------------------------------------------- contract
def test_registry_contract_and_guarantees() -> None:
    g = torch.Generator().manual_seed(18)
    cand = torch.randn(20, 5, generator=g)
    mech = mechanisms.create("deepcandidate", epsilon=2.0, candidates=cand, num_projections=7, projection_seed=3)
    assert isinstance(mech, DeepCandidate) and isinstance(mech, DocumentMechanism)
    assert "deepcandidate" in mechanisms.names() and mech.level == "document"
    assert mech.guarantee == mechanisms.Guarantee(notion="pure", epsilon=2.0, granularity="sentence")
    doc_g = mech.document_guarantee(9)
    assert (doc_g.notion, doc_g.epsilon, doc_g.granularity) == ("pure", 9.0, "document")
    assert mech.document_guarantee(0).epsilon == 0.0
    for bad in (-1, 2.5, True):
        with pytest.raises(ValueError, match="num_sentences"):
            mech.document_guarantee(bad)
    idx = mech.sanitize(
        [torch.randn(3, 5, generator=g), torch.randn(6, 5, generator=g)], generator=torch.Generator().manual_seed(0)
    )
    assert idx.dtype == torch.int64 and idx.shape == (2,) and bool(((idx >= 0) & (idx < 20)).all())
    assert mech.sanitize([]).shape == (0,)
    assert DeepCandidate(1.0, cand).num_projections == 100


def test_invalid_inputs_are_refused() -> None:
    g = torch.Generator().manual_seed(19)
    cand = torch.randn(20, 5, generator=g)
    mech = DeepCandidate(1.0, cand, num_projections=4)
    with pytest.raises(ValueError, match="sentence"):
        mech.sanitize([torch.randn(3, 5, generator=g), torch.randn(1, 5, generator=g)])
    with pytest.raises(ValueError, match="dimension"):
        mech.sanitize([torch.randn(3, 4, generator=g)])
    with pytest.raises(ValueError, match="NaN"):
        mech.log_probs(torch.tensor([[0.0] * 5, [math.nan] * 5]))
    with pytest.raises(TypeError):
        mech.sanitize(torch.randn(3, 5, generator=g))
    for bad in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(ValueError, match="epsilon"):
            mechanisms.create("deepcandidate", epsilon=bad, candidates=cand, num_projections=4, projection_seed=0)
    for bad in (0, 10_001, 2.5, True, None):
        with pytest.raises(ValueError, match="num_projections"):
            DeepCandidate(1.0, cand, num_projections=bad)
    for bad in (
        torch.randn(5, generator=g),
        torch.randn(1, 5, generator=g),
        torch.ones(4, 5, dtype=torch.int64),
        torch.tensor([[0.0, 1.0], [math.nan, 0.0]]),
    ):
        with pytest.raises(ValueError, match="candidates"):
            DeepCandidate(1.0, bad)
    with pytest.raises(ValueError, match="overflow"):
        DeepCandidate(1.0, torch.full((3, 4), 1e308, dtype=torch.float64))
    with pytest.raises(ValueError, match="projection_seed"):
        DeepCandidate(1.0, cand, projection_seed=-1)
    with pytest.raises(ValueError, match="bad parameters"):
        mechanisms.create("deepcandidate", epsilon=1.0)


def test_reproducible_with_a_seeded_generator() -> None:
    g = torch.Generator().manual_seed(0)
    cand = torch.randn(300, 6, generator=g)
    docs = [torch.randn(int(k), 6, generator=g) for k in torch.randint(2, 12, (200,), generator=g)]
    mech = DeepCandidate(5.0, cand, num_projections=12, projection_seed=1)
    a = mech.sanitize(docs, generator=torch.Generator().manual_seed(42))
    b = mech.sanitize(docs, generator=torch.Generator().manual_seed(42))
    c = mech.sanitize(docs, generator=torch.Generator().manual_seed(43))
    assert torch.equal(a, b) and not torch.equal(a, c)
    with torch.random.fork_rng():  # the default (global) RNG path, seeded and restored afterwards
        torch.manual_seed(0)
        assert mech.sanitize(docs).shape == (200,)


def test_projections_are_public_and_independent_of_the_data() -> None:
    """V depends on (d, p, projection_seed) only: not on the candidates nor on any document."""
    g = torch.Generator().manual_seed(0)
    m1 = DeepCandidate(1.0, torch.randn(30, 6, generator=g), num_projections=9, projection_seed=5)
    m2 = DeepCandidate(3.0, 100 * torch.randn(7, 6, generator=g), num_projections=9, projection_seed=5)
    before = m1.directions.clone()
    m1.sanitize([torch.randn(4, 6, generator=g) for _ in range(10)], generator=torch.Generator().manual_seed(1))
    assert torch.equal(m1.directions, before) and torch.equal(m1.directions, m2.directions)
    assert torch.equal(m1.directions, random_directions(6, 9, 5))
    assert torch.allclose(m1.directions.norm(dim=1), torch.ones(9, dtype=torch.float64), atol=1e-12)
    m3 = DeepCandidate(1.0, torch.randn(30, 6, generator=g), num_projections=9, projection_seed=6)
    assert not torch.allclose(m1.directions, m3.directions)


def test_batch_equals_per_document() -> None:
    """Batched utilities equal one-document calls; a batched release equals sequential one-document
    releases drawn from the same generator stream."""
    g = torch.Generator().manual_seed(1)
    cand = torch.randn(400, 6, generator=g)
    docs = [torch.randn(int(k), 6, generator=g) for k in torch.randint(2, 16, (40,), generator=g)]
    mech = DeepCandidate(4.0, cand, num_projections=20, projection_seed=2)
    assert torch.equal(mech.batch_utilities(docs), torch.stack([mech.utilities(x) for x in docs]))
    batched = mech.sanitize(docs, generator=torch.Generator().manual_seed(3))
    seq_gen = torch.Generator().manual_seed(3)
    sequential = torch.cat([mech.sanitize([x], generator=seq_gen) for x in docs])
    assert torch.equal(batched, sequential)


@pytest.mark.parametrize("block", [1, 500, 30_000])
def test_chunked_equals_unchunked(block: int) -> None:
    """A tiny element budget (one document per chunk, a few projections per block) changes nothing."""
    g = torch.Generator().manual_seed(4)
    cand = torch.randn(250, 6, generator=g)
    docs = [torch.randn(int(k), 6, generator=g) for k in torch.randint(2, 30, (25,), generator=g)]
    full = DeepCandidate(4.0, cand, num_projections=20, projection_seed=2)
    tiny = DeepCandidate(4.0, cand, num_projections=20, projection_seed=2, block_elements=block)
    assert torch.equal(full.batch_utilities(docs), tiny.batch_utilities(docs))
    a = full.sanitize(docs, generator=torch.Generator().manual_seed(8))
    b = tiny.sanitize(docs, generator=torch.Generator().manual_seed(8))
    assert torch.equal(a, b)


@pytest.mark.gpu
def test_cuda_release_and_utilities() -> None:
    """With a CUDA generator the release is drawn on the GPU; utilities there equal the CPU's."""
    g = torch.Generator().manual_seed(0)
    cand = torch.randn(500, 16, generator=g)
    docs = [torch.randn(int(k), 16, generator=g) for k in torch.randint(2, 20, (64,), generator=g)]
    mech = DeepCandidate(3.0, cand, num_projections=32, projection_seed=1)
    cuda_docs = [x.cuda() for x in docs]
    assert torch.equal(mech.batch_utilities(cuda_docs).cpu(), mech.batch_utilities(docs))
    idx = mech.sanitize(cuda_docs, generator=torch.Generator(device="cuda").manual_seed(0))
    assert idx.device.type == "cuda" and idx.shape == (64,)
