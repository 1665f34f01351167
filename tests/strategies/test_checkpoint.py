"""A checkpoint saves a strategy that keeps arrays it sent: sending deflates them into memoryviews of
the message's buffers (as Flower's Deployment Runtime grid does), which plain pickling refuses."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest
from flwr.app import Array, ArrayRecord, Message, RecordDict
from flwr.serverapp.strategy import FedAvg
from flwr.supercore.inflatable.inflatable_object import get_all_nested_objects, no_object_id_recompute

from strategies.checkpoint import load_checkpoint, save_checkpoint


def _sent(record: ArrayRecord) -> None:
    """Deflate ``record`` inside a message, as a grid's push_messages does before sending it."""
    message = Message(RecordDict({"arrays": record}), dst_node_id=5, message_type="train")
    with no_object_id_recompute():
        get_all_nested_objects(message)


def test_a_strategy_keeping_sent_arrays_is_checkpointed_with_their_values(tmp_path: Path) -> None:
    kept = ArrayRecord({"w": Array(np.arange(6.0)), "b": Array(np.ones(2, dtype=np.float32))})
    _sent(kept)
    with pytest.raises(TypeError, match="memoryview"):  # the power check: what a plain pickle does
        pickle.dumps(kept)
    strategy = FedAvg()
    strategy.current_arrays = kept  # type: ignore[attr-defined]  (as Flower's DP wrappers keep them)
    save_checkpoint(tmp_path, 1, strategy, kept)
    done, loaded, arrays, _ = load_checkpoint(tmp_path, writer=None)
    assert done == 1
    restored = loaded.current_arrays  # type: ignore[attr-defined]
    for record in (restored, arrays):
        assert np.array_equal(record["w"].numpy(), np.arange(6.0))
        assert record["b"].numpy().dtype == np.float32 and np.array_equal(record["b"].numpy(), np.ones(2))
