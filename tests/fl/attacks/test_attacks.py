"""The attacks of fl.attacks: each succeeds clearly where there is something to learn (no noise) and falls
to chance under strong noise. Fixed seeds and samples large enough that chance cannot pass them (the
standard error of a success rate on 200 + 200 evaluation examples is about 0.025)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats

from fl.attacks import attribute, inversion, mia
from fl.maps.pipeline import ServerModel, train_epochs


# ---------------------------------------------------------------------------- the protocol itself
def test_protocol_recovers_known_figures() -> None:
    """Members ~ N(1, 1), non-members ~ N(0, 1): best balanced accuracy Phi(1/2), AUC Phi(1/sqrt 2),
    TPR at 1% FPR 1 - Phi(z_0.99 - 1)."""
    rng = np.random.default_rng(0)
    r = mia.evaluate("gauss", rng.normal(1.0, 1.0, 40_000), rng.normal(0.0, 1.0, 40_000), 0, "k")
    assert r.success == pytest.approx(stats.norm.cdf(0.5), abs=0.01)
    assert r.auc == pytest.approx(stats.norm.cdf(1 / math.sqrt(2)), abs=0.01)
    assert r.tpr_at_1pct_fpr == pytest.approx(1 - stats.norm.cdf(stats.norm.ppf(0.99) - 1), abs=0.015)
    assert r.fpr_at_that_threshold == pytest.approx(0.01, abs=0.003)
    same = mia.evaluate("null", rng.normal(size=40_000), rng.normal(size=40_000), 0, "k")
    assert abs(same.success - 0.5) < 0.01 and abs(same.auc - 0.5) < 0.01


def test_scores_are_what_the_papers_define() -> None:
    p = np.array([[0.7, 0.2, 0.1]])
    s = mia.scores(p, np.array([0]))
    assert s["confidence"][0] == pytest.approx(0.7) and s["loss"][0] == pytest.approx(math.log(0.7))
    assert s["entropy"][0] == pytest.approx(0.7 * math.log(0.7) + 0.2 * math.log(0.2) + 0.1 * math.log(0.1))
    mentr = -(0.3) * math.log(0.7) - 0.2 * math.log(0.8) - 0.1 * math.log(0.9)  # Song & Mittal (2021)
    assert s["modified_entropy"][0] == pytest.approx(-mentr)
    assert mia.logit_confidence(p, np.array([0]))[0] == pytest.approx(math.log(0.7 / 0.3))
    got = mia.lira_offline_scores(np.array([1.0]), np.array([[0.0], [2.0]]), global_variance=False)
    assert got[0] == pytest.approx(stats.norm.logcdf(1.0, loc=1.0, scale=math.sqrt(2.0)))


# ---------------------------------------------------------------------------- membership inference
def _train(x: torch.Tensor, y: torch.Tensor, seed: int, epochs: int = 120) -> ServerModel:
    torch.manual_seed(seed)
    model = ServerModel(x.shape[1], 64, 64, 2)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    train_epochs(model, opt, x, y, epochs, 128, torch.Generator().manual_seed(seed))
    return model


def _population(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 16, generator=g), torch.randint(0, 2, (n,), generator=g)  # labels: pure noise


@pytest.fixture
def one_thread():
    """Small models train faster on one thread (and do not fight other processes for cores)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.mark.usefixtures("one_thread")
@pytest.mark.parametrize("noise", [0.0, 30.0])
def test_membership_inference_succeeds_without_noise_and_fails_under_strong_noise(noise: float) -> None:
    """A model that memorises random labels leaks membership; one trained on releases x + N(0, 30^2)
    cannot memorise them. Threshold attacks and offline LiRA (8 shadows on disjoint same-law data)."""
    xm, ym = _population(400, 1)
    xo, yo = _population(400, 2)
    g = torch.Generator().manual_seed(3)
    released = xm + noise * torch.randn(xm.shape, generator=g)
    target = _train(released, ym, 0)
    pm, po = mia.probabilities(target, xm), mia.probabilities(target, xo)
    threshold = mia.threshold_attacks(pm, ym.numpy(), po, yo.numpy(), seed=0)
    best = max(r.success for r in threshold)
    best_tpr = max(r.tpr_at_1pct_fpr for r in threshold)
    best_auc = max(r.auc for r in threshold)
    shadows = []
    for i in range(8):
        xs, ys = _population(400, 100 + i)
        shadows.append(_train(xs + noise * torch.randn(xs.shape, generator=g), ys, 10 + i))
    sm = np.stack([mia.logit_confidence(mia.probabilities(s, xm), ym.numpy()) for s in shadows])
    so = np.stack([mia.logit_confidence(mia.probabilities(s, xo), yo.numpy()) for s in shadows])
    lira = mia.lira_offline(mia.logit_confidence(pm, ym.numpy()), mia.logit_confidence(po, yo.numpy()), sm, so, seed=0)
    if noise == 0.0:
        assert best > 0.8 and best_auc > 0.85 and best_tpr > 0.02 and lira.success > 0.7 and lira.auc > 0.75
    else:
        assert best < 0.6 and abs(best_auc - 0.5) < 0.08 and lira.success < 0.6 and abs(lira.auc - 0.5) < 0.08


# ---------------------------------------------------------------------------- attribute inference
@pytest.mark.parametrize("noise", [0.0, 40.0])
def test_attribute_inference_reads_a_clean_release_and_not_a_noisy_one(noise: float) -> None:
    """Five attribute values, each a direction in R^16 (+ N(0, 0.5^2) spread); releases add N(0, noise^2)."""
    rng = np.random.default_rng(0)
    centres = rng.normal(0, 2.0, (5, 16))

    def draw(n: int) -> tuple[np.ndarray, np.ndarray]:
        y = rng.integers(0, 5, n)
        return centres[y] + rng.normal(0, 0.5, (n, 16)) + rng.normal(0, noise, (n, 16)) if noise else centres[
            y
        ] + rng.normal(0, 0.5, (n, 16)), y

    (ax, ay), (vx, vy) = draw(2000), draw(1000)
    r = attribute.attribute_attack(ax, ay, vx, vy, 5, "synthetic", seed=0)
    if noise == 0.0:
        assert r.accuracy > 0.95 and r.advantage > 0.7
    else:
        assert r.advantage < 0.06  # about the majority rate (0.2 here)


# ---------------------------------------------------------------------------- inversion
WORDS = [f"w{chr(97 + i)}{chr(97 + j)}" for i in range(10) for j in range(10)]  # 100 content words


def _corpus(n: int, rng: np.random.Generator, table: np.ndarray) -> tuple[list[str], np.ndarray]:
    """Texts of 4-8 distinct words; a text's embedding is the normalised sum of its words' vectors."""
    texts, rows = [], []
    for _ in range(n):
        ids = rng.choice(len(WORDS), rng.integers(4, 9), replace=False)
        texts.append(" ".join(WORDS[i] for i in ids))
        v = table[ids].sum(0)
        rows.append(v / np.linalg.norm(v))
    return texts, np.asarray(rows, dtype=np.float32)


@pytest.mark.parametrize("noise", [0.0, 5.0])
def test_inversion_recovers_words_and_sentences_from_clean_releases_only(noise: float) -> None:
    rng = np.random.default_rng(0)
    table = rng.normal(size=(len(WORDS), 64))
    aux_t, aux_clean = _corpus(3000, rng, table)
    vic_t, vic_clean = _corpus(300, rng, table)
    aux_x = aux_clean + rng.normal(0, noise, aux_clean.shape).astype(np.float32)
    vic_x = vic_clean + rng.normal(0, noise, vic_clean.shape).astype(np.float32)
    pool = np.concatenate([aux_clean, vic_clean])
    truth = np.arange(len(aux_t), len(aux_t) + len(vic_t))
    r = inversion.inversion_attack(aux_x, aux_t, vic_x, vic_t, pool, truth, vocab_size=100, seed=0)
    if noise == 0.0:
        assert r.f1 > 0.8 and r.exact_recovery > 0.9
    else:
        # the attacker's map learns little beyond word frequencies: far below the clean figure
        assert r.f1 < 0.3 and r.exact_recovery < 10 * r.chance_recovery


def test_content_words_drop_stop_words_and_punctuation() -> None:
    assert inversion.content_words("The movie , it 's a GREAT film!") == {"movie", "great", "film"}
    assert inversion.vocabulary(["a b c", "b c", "c"], 2) == []  # single letters are not content words
    assert inversion.vocabulary(["good film", "good plot", "film"], 2) == ["film", "good"]
