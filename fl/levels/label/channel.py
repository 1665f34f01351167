"""The label channel: randomized response (Warner 1965), RR-with-prior (Ghazi et al. 2021) or
labels in the clear (``none``). One label release is one use of the mechanism's guarantee."""

from __future__ import annotations

import numpy as np
import torch

from fl.accounting.charges import Charge
from fl.data import datasets as data
from fl.levels.spec import LevelSpec
from mechanisms.guarantee import Guarantee
from mechanisms.rr_prior import LabelPrior


class LabelChannel:
    """Sanitize training labels; RR-with-prior takes its prior from public class frequencies or
    from the server model applied to the *sanitized* embedding (post-processing), never from raw data.

    Parameters
    ----------
    spec : LevelSpec
        The run's level inputs: its release section (``label-*`` keys) and, for ``label-prior =
        "public"``, the data whose public documents give the prior.
    num_classes : int, optional
        The run's number of classes (randomized response's exact account needs it).
    """

    level = "label"

    def __init__(self, spec: LevelSpec, num_classes: int | None = None) -> None:
        self.spec = spec
        self.mechanism = spec.release.mechanism("label")
        self.num_classes = num_classes

    @property
    def guarantee(self) -> Guarantee:
        """The mechanism's guarantee, among the run's classes when known (randomized response's exact
        account needs their number K: ``Guarantee.over``; unknown, the generic pair)."""
        g = self.mechanism.guarantee
        return g if self.num_classes is None else g.over(self.num_classes)

    def charges(self, n: int) -> tuple[list[Charge], np.ndarray]:
        """One charge, shared by every label release."""
        charge = Charge(self.guarantee)
        return [charge], np.zeros(n, dtype=np.int64)

    def costs(self, n: int) -> np.ndarray:
        return np.full(n, Charge(self.guarantee).cost, dtype=np.float64)

    def prior(self, released: torch.Tensor, model: torch.nn.Module | None, num_classes: int) -> LabelPrior | None:
        """RR-with-prior's prior for these released rows (``None`` for other mechanisms)."""
        release = self.spec.release
        if release.label_mechanism != "rr_prior":
            return None
        if release.label_prior == "public":
            public = data.load(self.spec.data, self.spec.users, self.spec.level).public
            if public is None:
                raise ValueError(
                    "label-prior = 'public' needs public documents (public-size, public-fraction or public-dataset)"
                )
            counts = np.bincount(np.asarray(public["label"], dtype=np.int64), minlength=num_classes)
            probs = torch.as_tensor(counts / counts.sum(), dtype=torch.float64).expand(released.shape[0], -1)
            return LabelPrior(probs, source="public")
        if model is None:
            raise ValueError("label-prior = 'model' but the server sent no model")
        with torch.no_grad():
            probs = torch.softmax(model(released.to(torch.float32)).to(torch.float64), dim=1)
        return LabelPrior(probs, source="sanitized")

    def release(
        self,
        y: torch.Tensor,
        released: torch.Tensor,
        model: torch.nn.Module | None,
        num_classes: int,
        generator: torch.Generator,
    ) -> np.ndarray:
        """One sanitized label per row (int64)."""
        prior = self.prior(released, model, num_classes)
        extra = {"prior": prior} if prior is not None else {}
        return self.mechanism.sanitize(y, num_classes, generator=generator, **extra).numpy()
