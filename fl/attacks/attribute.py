"""Attribute inference from released embeddings.

Attacker knowledge (``KNOWLEDGE``): the releases of the victims (what the
server sees) and an auxiliary public set of texts labelled with the sensitive
attribute, released through the same pipeline (public M1, the known local
mechanism: the attacker draws the noise itself, as any white-box attacker can).
It trains a softmax-regression classifier on the auxiliary releases and
predicts each victim's attribute from its release. Reported: accuracy and
macro-F1 on the victims against the majority-class rate (the best an attacker
without the release achieves from the attribute's prior alone).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch

from fl.attacks.common import Standardise

KNOWLEDGE = (
    "the victims' releases; an auxiliary public set labelled with the attribute, released through the same "
    "M1 and local mechanism by the attacker"
)


@dataclass(frozen=True)
class AttributeResult:
    attribute: str
    accuracy: float
    macro_f1: float
    majority_rate: float  # chance level: always guessing the auxiliary set's most frequent value
    num_values: int
    n_aux: int
    n_victims: int
    knowledge: str = KNOWLEDGE

    @property
    def advantage(self) -> float:
        """Accuracy above the majority rate (0: the release tells nothing beyond the prior)."""
        return self.accuracy - self.majority_rate

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "advantage": self.advantage}


def fit_softmax(
    x: np.ndarray, y: np.ndarray, num_classes: int, seed: int, epochs: int = 200, weight_decay: float = 1e-4
) -> torch.nn.Module:
    """Multinomial logistic regression on standardised features (full-batch Adam, seeded)."""
    gen = torch.Generator().manual_seed(int(seed))
    xt = torch.as_tensor(np.asarray(x), dtype=torch.float32)
    lin = torch.nn.Linear(xt.shape[1], int(num_classes))
    with torch.no_grad():
        lin.weight.copy_(torch.randn(lin.weight.shape, generator=gen) * 0.01)
        lin.bias.zero_()
    model = torch.nn.Sequential(Standardise.fit(xt), lin)
    opt = torch.optim.Adam(lin.parameters(), lr=0.05, weight_decay=weight_decay)
    yt = torch.as_tensor(np.asarray(y), dtype=torch.long)
    for _ in range(int(epochs)):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(xt), yt)
        loss.backward()
        opt.step()
    return model.eval()


def _macro_f1(y: np.ndarray, pred: np.ndarray, k: int) -> float:
    f1s = []
    for c in range(k):
        tp = int(((pred == c) & (y == c)).sum())
        fp, fn = int(((pred == c) & (y != c)).sum()), int(((pred != c) & (y == c)).sum())
        if tp + fp + fn:
            f1s.append(2 * tp / (2 * tp + fp + fn))
    return float(np.mean(f1s)) if f1s else 0.0


def attribute_attack(
    aux_x: np.ndarray,
    aux_y: np.ndarray,
    victim_x: np.ndarray,
    victim_y: np.ndarray,
    num_values: int,
    attribute: str,
    seed: int = 0,
) -> AttributeResult:
    """Train on the auxiliary releases, predict the victims' attribute (module docstring)."""
    aux_y, victim_y = np.asarray(aux_y, dtype=np.int64), np.asarray(victim_y, dtype=np.int64)
    if len(aux_x) < 2 or len(victim_x) < 1:
        raise ValueError("attribute inference needs auxiliary releases (>= 2) and victims (>= 1)")
    model = fit_softmax(aux_x, aux_y, num_values, seed)
    with torch.no_grad():
        pred = model(torch.as_tensor(np.asarray(victim_x), dtype=torch.float32)).argmax(1).numpy()
    majority = int(np.bincount(aux_y, minlength=num_values).argmax())
    return AttributeResult(
        attribute=attribute,
        accuracy=float((pred == victim_y).mean()),
        macro_f1=_macro_f1(victim_y, pred, num_values),
        majority_rate=float((victim_y == majority).mean()),
        num_values=int(num_values),
        n_aux=int(len(aux_y)),
        n_victims=int(len(victim_y)),
    )
