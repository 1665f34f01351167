"""The one door through which a driver reads a run's data: :class:`RunInputs`.

``compare`` and ``tune`` need facts of a run before any run starts (its number of classes, its training
population, its public embeddings and their source groups, the test split's class frequencies, the public
classifier's test accuracy). Each comes from one property here, computed from the run's resolved config the
first time it is asked for and kept; the documents themselves are loaded by :func:`fl.data.datasets.load`
(cached per data, users and level), so a driver loads each seed's documents once however many facts it reads.
The private users' documents are read only for the population size; the recipe's facts
(:attr:`RunInputs.public`, :attr:`RunInputs.public_groups`) come from the public documents alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from functools import cached_property
from typing import Any

from fl import config as config_mod


class RunInputs:
    """What a driver reads of one resolved run config's data, each fact computed once."""

    def __init__(self, cfg: Mapping[str, Any]) -> None:
        self.cfg = config_mod.as_run_config(cfg)

    @classmethod
    def at_seed(cls, cfg: Mapping[str, Any], seed: int) -> RunInputs:
        """The inputs of ``cfg``'s runs at ``seed`` (the users' seed decides the split and the public draw)."""
        resolved = config_mod.as_run_config(cfg)
        return cls(replace(resolved, users=replace(resolved.users, seed=int(seed))))

    @cached_property
    def dataset(self) -> Any:
        """The loaded documents (:func:`fl.data.datasets.load`)."""
        from fl.data import datasets as data

        return data.load(self.cfg.data, self.cfg.users, self.cfg.release.level)

    @property
    def is_text(self) -> bool:
        from fl.data import datasets as data

        return isinstance(self.dataset, data.TextDataset)

    @property
    def num_classes(self) -> int:
        return int(self.dataset.num_classes)

    @cached_property
    def dim(self) -> int:
        """The encoder's output dimension (the data's own for synthetic vectors)."""
        dim = int(getattr(self.dataset, "dim", 0)) or config_mod.ENCODER_DIMS.get(str(self.cfg["encoder"]), 0)
        if not dim:
            from fl.encoding.encoder import encoder_dimension

            dim = int(encoder_dimension(str(self.cfg["encoder"])))
        return dim

    @cached_property
    def train_users(self) -> int:
        """The training population (users), as the run partitions it."""
        from fl.cohort import population_sizes

        return int(population_sizes(self.cfg.data, self.cfg.users, self.cfg.release.level)[0])

    @cached_property
    def test_priors(self) -> list[float]:
        """The test split's class frequencies (empty for synthetic data)."""
        import numpy as np

        if not self.is_text:
            return []
        labels = np.asarray(self.dataset.test["label"][:], dtype=np.int64)
        counts = np.bincount(labels, minlength=self.num_classes)
        return (counts / counts.sum()).tolist()

    @cached_property
    def public(self) -> tuple[Any, Any]:
        """The public documents' embeddings and labels, through the run's (public-tuned) encoder, on the CPU:
        what the run's nodes compute (:func:`fl.maps.public_start.public_embeddings`)."""
        import torch

        from fl.encoding.encoder import best_device
        from fl.encoding.public_tuning import TuningSpec, tuned_encoder
        from fl.maps.public_start import PublicSpec, public_embeddings

        encoder = tuned_encoder(TuningSpec.from_config(self.cfg), best_device(self.cfg.server.device))
        return public_embeddings(replace(PublicSpec.from_config(self.cfg), encoder=encoder), torch.device("cpu"))

    @cached_property
    def public_groups(self) -> Any:
        """Each public document's source group (a hold-out keeps a group on one side)."""
        from fl.data import datasets as data

        return data.public_groups(self.cfg.data, self.cfg.users, self.cfg.release.level)

    @cached_property
    def public_model_accuracy(self) -> float | None:
        """The public classifier's test accuracy (the logistic regression the supervised map is made of, on the
        run's encoder, scored on the clean test inputs): a reference figure, never used to choose anything.
        None without public documents."""
        import numpy as np
        import torch

        from fl.encoding.encoder import best_device, embed_texts
        from fl.encoding.public_tuning import TuningSpec, tuned_encoder
        from fl.maps.input_map import logistic_directions
        from mechanisms.class_rr import logit_class

        ds = self.dataset
        if not self.is_text or ds.public is None:
            return None
        tuning = TuningSpec(self.cfg.data, self.cfg.users, self.cfg.encoder, self.cfg.release)
        encoder = tuned_encoder(tuning, best_device(self.cfg.server.device))
        xp = np.asarray(embed_texts(ds.public["text"][:], encoder, "cpu", progress=False))
        xt = np.asarray(embed_texts(ds.test["text"][:], encoder, "cpu", progress=False))
        a, b = logistic_directions(xp, np.asarray(ds.public["label"][:]), ds.num_classes)
        pred = logit_class(torch.as_tensor(xt @ a + b), ds.num_classes).numpy()
        return float((pred == np.asarray(ds.test["label"][:])).mean())
