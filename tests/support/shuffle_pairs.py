"""Brute force for the shuffle tests: the variation-ratio pair enumerated from its definition, and its
exact hockey-stick divergence."""

from __future__ import annotations

import math
from collections import defaultdict

from fl.accounting.analysis.variation_ratio import (
    VRParameters,
)


# --------------------------------------------------------------------------- #
# Brute force: the VR pair (P, Q) enumerated from its definition (Lemma 4.4/4.5)
# --------------------------------------------------------------------------- #
def brute_vr_pair(params: VRParameters, n: int, *, reveal: bool = True):
    """The VR pair outcome by outcome (floats): P = (A + D1, C - A + D2[, flag]), Q = (A + D2, C - A + D1[, flag]).

    reveal=True: the victim's residual flag (D = (0, 0)) is part of the outcome (what Sanitas bounds);
    reveal=False: the paper's merged pair (not an upper bound in general, see the k-RR tests).
    """
    p = math.exp(params.log_p)
    alpha = params.beta / (p - 1.0)
    g = params.g_value
    clone = 2.0 * alpha * p / math.exp(params.log_q)
    victim = ((1, 0, p * alpha, 0), (0, 1, alpha, 0), (0, 0, g, 1 if reveal else 0))
    P: dict[tuple[int, int, int], float] = defaultdict(float)
    Q: dict[tuple[int, int, int], float] = defaultdict(float)
    m = n - 1
    for c in range(m + 1):
        wc = math.comb(m, c) * clone**c * (1.0 - clone) ** (m - c)
        for a in range(c + 1):
            wa = wc * math.comb(c, a) / 2.0**c
            for d1, d2, wd, flag in victim:
                P[(a + d1, c - a + d2, flag)] += wa * wd
                Q[(a + d2, c - a + d1, flag)] += wa * wd
    return P, Q


def hockey_stick(P, Q, eps: float) -> float:
    e = math.exp(eps)
    return math.fsum(max(0.0, P[o] - e * Q.get(o, 0.0)) for o in P)
