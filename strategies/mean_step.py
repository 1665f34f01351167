"""Central mode with a Flower strategy whose aggregate is a mean (FedAvg, FedAvgM, FedAdam, FedYogi,
FedAdagrad, FedProx, or a user's own declaring ``aggregate_is_mean = True``): the DP step's noisy mean is
the strategy's input, in place of ``server-optimizer``.

The DP step is Sanitas' and unchanged (user level: the nodes' sums of clipped per-user updates plus
Gaussian noise over ``q N``; node level: Flower's fixed-clipping wrapper around an unweighted FedAvg of
``k`` nodes). Its output is one noisy mean update ``u``; a mean-family strategy would have aggregated the
nodes' models to ``current + mean update``, so :class:`MeanStep` hands it exactly that, as the one reply of
one node of weight 1, and keeps what the strategy returns: FedAvg's step is ``current + u``, FedAvgM's
adds server momentum, FedAdam / FedYogi / FedAdagrad take ``u`` as their pseudo-gradient. Everything the
strategy does is post-processing of the noisy mean, so the accounting is unchanged.

The strategy's training config (FedProx's ``proximal-mu``) reaches the nodes with every request
(:meth:`MeanStep.request_config`); its node sampling and its evaluation are not used (the DP step samples,
Sanitas evaluates).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Message, MessageType, MetricRecord, RecordDict
from flwr.serverapp.strategy import Strategy


def like(arrays: ArrayRecord, model: ArrayRecord) -> ArrayRecord:
    """``arrays`` in ``model``'s dtypes: FedOpt's arithmetic is float64 (numpy promotes), and what crosses and
    what checkpoints store keep the model's width."""
    return ArrayRecord({k: Array(np.asarray(arrays[k].numpy(), dtype=model[k].numpy().dtype)) for k in model})


class _OneNode:
    """The grid a strategy's ``configure_train`` is asked on for its config and state: one node, id 1."""

    def get_node_ids(self) -> list[int]:
        return [1]


class MeanStep:
    """A mean-family Flower ``strategy`` stepping the global model from the DP step's noisy mean.

    Parameters
    ----------
    strategy : Strategy
        Built with ``min_available_nodes = min_train_nodes = 1`` (``strategies.loading.build``).
    name : str
        Its name in summaries and round records.
    """

    def __init__(self, strategy: Strategy, name: str) -> None:
        self.strategy = strategy
        self.name = name

    def request_config(self, server_round: int, arrays: ArrayRecord) -> dict[str, Any]:
        """The strategy's training config for this round (e.g. FedProx's ``proximal-mu``), from its own
        ``configure_train`` with the current model, which also sets what its step reads (FedOpt's
        ``current_arrays``). Call it once per round, before :meth:`step`."""
        messages = list(self.strategy.configure_train(server_round, arrays, ConfigRecord(), _OneNode()))  # type: ignore[arg-type]
        key = getattr(self.strategy, "configrecord_key", "config")
        if not messages or key not in messages[0].content:
            return {}
        return {k: v for k, v in dict(messages[0].content[key]).items() if k != "server-round"}

    def step(self, server_round: int, current: ArrayRecord, update: dict[str, np.ndarray]) -> ArrayRecord:
        """The strategy's new global model from ``current`` and the noisy mean ``update`` (same keys)."""
        aggregated = ArrayRecord(
            {
                k: Array(np.asarray(current[k].numpy() + update[k].astype(current[k].numpy().dtype, copy=False)))
                for k in current
            }
        )
        key = getattr(self.strategy, "arrayrecord_key", "arrays")
        weight = getattr(self.strategy, "weighted_by_key", "num-examples")
        request = Message(content=RecordDict(), dst_node_id=1, message_type=MessageType.TRAIN)
        reply = Message(content=RecordDict({key: aggregated, "metrics": MetricRecord({weight: 1})}), reply_to=request)
        result, _ = self.strategy.aggregate_train(server_round, [reply])
        if result is None:
            return aggregated
        return like(result, current)


def server_step_label(step: MeanStep | None) -> str:
    """`` (FedAdam)`` for plot titles when a Flower strategy steps the model; empty otherwise."""
    return "" if step is None else f" ({step.name})"
