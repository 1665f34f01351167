"""ServerMap: M1 on the server, the public-only line fitted in its space, and the cohorts' refitted maps.

The part of :class:`strategies.local.release_training.ReleaseTraining` that builds and moves M1, the
input map the nodes apply before their mechanism: its start (a public seed, pretraining or the
supervised map on the public split, the public projection, or the leaky mode's map trained on the
clients' unsanitized gradients), the record that carries it to the nodes when the server provides it,
the models of the public data alone held against the run (the public-only line), and, with
``cohorts`` > 1, M1 refitted between cohorts from public data and earlier releases. Only public
documents and releases are read here; nothing here costs privacy (the leaky mode, which is not
private, aside).

A mixin: the attributes it reads are set by ``ReleaseTraining.__init__`` and its discovery.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import torch
from flwr.app import Array, ArrayRecord

from fl import config as config_mod
from fl import wire
from fl.config import RunConfig
from fl.levels.channels import Channels
from fl.maps import class_means
from fl.maps import cohorts as cohort_maps
from fl.maps import input_map as maps
from fl.maps.minibatch import server_adam
from fl.maps.pipeline import build_model, train_epochs
from fl.maps.public_model import PublicModel
from fl.maps.public_start import (
    PublicSpec,
    cached_public_model,
    projection_start,
    public_embeddings,
    supervised_start,
    train_public_start,
)
from fl.reporting.progress import bar as progress_bar

log = logging.getLogger("strategies.local.release_training")  # the name its messages have always had


class ServerMap:
    """M1, the public-only line and the cohorts' maps of :class:`~strategies.local.release_training.ReleaseTraining`."""

    # Set by ReleaseTraining (its __init__ and discovery).
    cfg: RunConfig
    device: torch.device
    info: wire.CohortInfo | None
    channels: Channels | None
    model: torch.nn.Module | None
    map_matrix: torch.Tensor | None
    public_model: PublicModel | None
    public_head: torch.nn.Module | None
    public_stats: class_means.PublicStatistics | None
    public_info: dict[str, Any]
    _gen: torch.Generator
    _map_param: torch.nn.Parameter | None
    _map_optimizer: torch.optim.Optimizer | None
    _last_fit: class_means.Fit | None
    _map_round: int
    _slot: np.ndarray
    _x_buf: np.ndarray
    _y_buf: np.ndarray
    _x: np.ndarray
    _y: np.ndarray

    # ------------------------------------------------------------------ M1
    @property
    def class_means(self) -> bool:
        """True when the server model is the debiased class means (``server-model = "class-means"``)."""
        return self.cfg.server.server_model == "class-means"

    @property
    def leaky(self) -> bool:
        """True when M1 is trained on clients' unsanitized gradients: no LDP guarantee holds."""
        return self.cfg.release.map_in == "leaky"

    def setup_map(self) -> None:
        """Prepare M1: public seed (random), pretraining on the public split (public), the public
        logistic-regression map (supervised), or a leaky start."""
        assert self.info is not None
        kind = self.cfg.release.map_in
        if kind == "supervised":
            self.map_matrix = self.supervised_public_map()
            return
        if kind == "projection":
            first = int(self.cfg.server.cohort_map_dim) if self.cohorts > 1 else 0  # the earlier cohorts' m'
            self.map_matrix, self.public_model, self.public_info = projection_start(
                PublicSpec.from_config(self.cfg), self.info.num_classes, first or self.info.map_dim, self.device
            )
            log.info(
                "M1 = the public projection on %d public documents (m' = %d: the public model's logit directions "
                "and principal directions), frozen",
                self.public_info["public_documents"],
                self.info.map_dim,
            )
            return
        self.map_matrix = maps.input_map(kind, self.info.encoder_dim, self.info.map_dim, self.cfg.release.map_seed)
        if kind == "public":
            self.map_matrix = self.pretrain_public_map()
        elif kind == "leaky":
            log.warning("map-in = 'leaky': clients send unsanitized M1 gradients; the run is NOT local DP")
            assert self.map_matrix is not None
            self._map_param = torch.nn.Parameter(self.map_matrix.to(self.device, torch.float32).clone())
            self._map_optimizer = torch.optim.Adam([self._map_param], lr=self.cfg.server.learning_rate)

    def pretrain_public_map(self) -> torch.Tensor:
        """Train M1, M2 and the classifier on the public split only; return the frozen M1.

        The server model keeps its public training as the starting point for
        training on releases.
        """
        assert self.model is not None and self.map_matrix is not None and self.info is not None
        mech = config_mod.make_mechanism(
            self.cfg, "sentence", input_dim=self.info.map_dim, num_classes=self.info.num_classes
        )
        matrix, info = train_public_start(
            PublicSpec.from_config(self.cfg), self.model, self.map_matrix, mech, self.device, self._gen
        )
        self.public_info = info
        log.info(
            "M1 trained on %d public documents (loss %.4f), frozen",
            self.public_info["public_documents"],
            self.public_info["public_loss"],
        )
        return matrix

    def supervised_public_map(self) -> torch.Tensor:
        """The affine M1 of ``map-in = "supervised"``, from the public split only (its scale chosen on
        a public hold-out under the run's mechanism when ``map-scale = 0``)."""
        assert self.info is not None
        mech = config_mod.make_mechanism(
            self.cfg, "sentence", input_dim=self.info.map_dim, num_classes=self.info.num_classes
        )
        matrix, info = supervised_start(
            PublicSpec.from_config(self.cfg), mech, self.info.num_classes, self.info.map_dim, self.device, self._gen
        )
        self.public_info = info
        log.info(
            "M1 = the public logistic regression's map on %d public documents (m' = %d, scale %g), frozen",
            info["public_documents"],
            info["map_dim"],
            info["map_scale"],
        )
        return matrix

    def _step_leaky_map(self, grad: np.ndarray) -> None:
        """One Adam step on M1 from the clients' mean gradient (leaky mode: not private)."""
        assert self._map_param is not None and self._map_optimizer is not None
        self._map_optimizer.zero_grad(set_to_none=True)
        self._map_param.grad = torch.as_tensor(grad, dtype=torch.float32, device=self.device)
        self._map_optimizer.step()
        self.map_matrix = self._map_param.detach().to("cpu", torch.float64)

    # ------------------------------------------------------------------ the public-only line
    def setup_public_only(self) -> None:
        """Fit the models of the public data alone, held against the run (no private user in them):

        * the public logistic regression on the encoder's embeddings (:mod:`fl.maps.public_model`), which
          the nodes score on clean test inputs (on-device inference);
        * the server model fitted on releases of the public documents alone (``public_head``), which the
          nodes score on the same sanitized test releases as the run's model (server-side inference) and,
          with clean-evaluation, on the same clean test inputs in M1's space as the run's model (on-device
          inference): with ``class-means`` the public class means' discriminant, with the MLP a fresh model
          trained on the server's own sanitized releases of the public documents (their labels are public),
          at the sentence level.

        On each test input the public-only line is the stronger of the models scored there
        (:func:`fl.reporting.outcome.against_public`). Only public documents are read; nothing here costs
        privacy. Runs without public data have none."""
        assert self.info is not None and self.channels is not None
        if not config_mod.has_public(self.cfg):
            return
        public = PublicSpec.from_config(self.cfg)
        x, y = public_embeddings(public, self.device)
        k = self.info.num_classes
        if self.public_model is None:
            self.public_model = cached_public_model(public, x, y, k)
        mech = getattr(self.channels.embedding, "mechanism", None)
        if self.cfg.release.level != "sentence" or mech is None or self.leaky:
            return  # the server can sanitize public documents itself only at the sentence level
        rows = maps.apply_input_map(x.cpu(), self.map_matrix)
        if self.class_means:
            self.public_stats = class_means.public_statistics(rows.numpy(), y.cpu().numpy(), k)
            empty = np.zeros((0, rows.shape[1]))
            fitted = class_means.fit(empty, np.zeros(0, np.int64), np.eye(k), 1.0, self.public_stats)
            self.public_head = fitted.head().to(self.device)
            return
        gen = torch.Generator().manual_seed(int(self.cfg.users.seed) + 7919)  # apart from the run's stream
        z = mech.sanitize(rows, generator=gen).to(torch.float32).to(self.device)
        with torch.random.fork_rng(devices=[]):  # build_model seeds the global generator: leave it as it was
            head = build_model(
                self.info.release_dim,
                self.info.encoder_dim,
                k,
                hidden_dim=self.cfg.server.hidden_dim,
                seed=self.cfg.users.seed,
            ).to(self.device)
        optimizer = server_adam(head.parameters(), self.cfg.server.learning_rate, self.device)
        epochs, batch = int(self.cfg.server.server_epochs), int(self.cfg.server.batch_size)
        with progress_bar(total=epochs, desc=f"public-only model on {len(y)} public releases", leave=False) as bar:
            # forward given: trained here, never stacked with a shared federation's points (fl.maps.pipeline)
            train_epochs(head, optimizer, z, y.to(self.device), epochs, batch, gen, lambda: bar.update(1), forward=head)
        self.public_head = head

    def _public_records(self) -> dict[str, ArrayRecord]:
        """The public-only models for an evaluate request (the logistic regression only when the nodes
        score clean test inputs)."""
        out: dict[str, ArrayRecord] = {}
        if self.public_model is not None and self.cfg.release.clean_evaluation:
            out[wire.PUBLIC_MODEL] = ArrayRecord({"matrix": Array(self.public_model.as_matrix().numpy())})
        if self.public_head is not None:
            out[wire.PUBLIC_RELEASE_MODEL] = ArrayRecord(self.public_head.state_dict())
        return out

    def _map_record(self) -> dict[str, ArrayRecord]:
        """M1 for the clients in the modes where the server provides it."""
        if self.cfg.release.map_in not in maps.FROM_SERVER:
            return {}
        assert self.map_matrix is not None
        return {wire.MAP_IN: ArrayRecord({"matrix": Array(self.map_matrix.numpy())})}

    # ------------------------------------------------------------------ cohorts
    @property
    def cohorts(self) -> int:
        """``cohorts``: the disjoint cohorts released one a round (1: every round samples afresh)."""
        return int(self.cfg.server.cohorts)

    @property
    def stage_dim(self) -> int:
        """The dimension of this round's releases: M1's output width (``map-dim``; with ``cohorts`` > 1 the earlier
        cohorts release at ``cohort-map-dim``)."""
        assert self.info is not None
        return int(self.map_matrix.shape[1]) if self.map_matrix is not None else int(self.info.map_dim)

    def _start_stage(self) -> None:
        """A fresh class-means head and empty release store at :attr:`stage_dim` (a cohort whose map has another
        width than the one before it)."""
        assert self.info is not None
        self.model = class_means.LinearHead(self.stage_dim, self.info.num_classes).to(self.device)
        self._slot = np.zeros(0, dtype=np.int64)
        self._x_buf = np.zeros((0, self.stage_dim), dtype=np.float32)
        self._y_buf = np.zeros(0, dtype=np.int64)
        self._x, self._y = self._x_buf, self._y_buf

    def next_cohort_map(self, server_round: int) -> None:
        """``cohorts`` > 1, before round ``server_round`` > 1 asks its cohort: M1 becomes the projection built
        from the last cohort's class-means fit (:func:`fl.maps.cohorts.next_projection`: public data and earlier
        releases only), the public statistics are rebuilt in the new space (the public-only head is dropped: in a
        map aimed by releases it is not a model of the public data alone), and the
        stored releases (in the old space) are set aside: the next fit reads the new cohort's releases only."""
        if self.cohorts == 1 or server_round == 1 or self._map_round == server_round:
            return
        assert self.info is not None and self.public_model is not None and self._last_fit is not None
        assert self.map_matrix is not None
        x, _ = public_embeddings(PublicSpec.from_config(self.cfg), self.device)
        directions = cohort_maps.discriminant_directions(self.map_matrix, self._last_fit.weight)
        self.map_matrix = cohort_maps.next_projection(directions, x, self.public_model.weight, self.info.map_dim)
        self._map_round = server_round
        self.setup_public_only()  # the public statistics in the new space, which the next fit combines with
        # A head fitted on public statistics in a map aimed by earlier cohorts' releases is not a model of the public
        # data alone: it is not scored as one (the public logistic regression stays the run's public-only line).
        self.public_head = None
        self._start_stage()
        log.info("cohort %d releases along M1 refitted from cohort %d's releases", server_round, server_round - 1)
