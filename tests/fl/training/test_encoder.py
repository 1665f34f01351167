"""The encoder under user-level central DP (``fl.training.encoder``): the split forward equals the
encoder's own, only the trainable part crosses, and the vectorized per-user clipped sums equal a
plain loop over users with a real optimizer."""

from __future__ import annotations

import pytest
import torch

from fl.encoding.encoder import load_encoder
from fl.maps.pipeline import ServerModel
from fl.training import encoder as encoder_training
from fl.training.encoder import (
    build_encoder_classifier,
    clipped_encoder_sum,
    encoder_predictions,
    load_trainable,
    lower_batches,
    lower_states,
    trainable_state,
)
from fl.training.user_updates import clipped_update_sum, pad_by_user
from tests.support.encoder_training import LABELS, TEXTS, encoder_cfg
from tests.support.user_updates import loop_reference


def _model(part: str, layers: int = 1, matrix: torch.Tensor | None = None):  # type: ignore[no-untyped-def]
    torch.manual_seed(0)
    head = ServerModel(384 if matrix is None else matrix.shape[1], 384, 8, 2)
    cfg = encoder_cfg(part, layers)
    return build_encoder_classifier(
        cfg.encoder, head, matrix, tuning_part=cfg.central.central_tuning_part, seed=cfg.users.seed
    )


@pytest.mark.parametrize(("part", "layers"), [("lora", 1), ("top", 2)])
def test_the_split_forward_is_the_encoders_own(part: str, layers: int) -> None:
    """Frozen lower layers, then the copied top layers (adapters at their zero start), pooling and
    normalisation: the sentence-transformers embedding of the same texts."""
    model = _model(part, layers)
    h, mask = lower_states(encoder_cfg(part, layers).encoder, TEXTS)
    with torch.no_grad():
        ours = model.embed(h, mask)
    theirs = torch.as_tensor(load_encoder("all-MiniLM-L6-v2", "cpu").encode(TEXTS, convert_to_numpy=True))
    assert torch.allclose(ours, theirs, atol=2e-5), (ours - theirs).abs().max()


def test_only_the_trainable_part_crosses() -> None:
    torch.manual_seed(0)
    state = trainable_state(_model("lora"))
    encoder = [k for k in state if k.startswith("top.")]
    assert encoder and all("lora_" in k for k in encoder)  # adapters only, never a frozen weight
    assert {k for k in state if k.startswith("head.")} == {
        f"head.{k}" for k in ServerModel(384, 384, 8, 2).state_dict()
    }
    assert sum(v.numel() for k, v in state.items() if k in encoder) == 2 * (2 * 384 + 2 * 384)  # q and v, rank 2
    other = _model("lora")
    with torch.no_grad():
        for p in other.parameters():
            if p.requires_grad:
                p.add_(1.0)
    load_trainable(other, state)
    assert all(torch.equal(v, trainable_state(other)[k]) for k, v in state.items())
    with pytest.raises(ValueError, match="do not match the trainable parameters"):
        load_trainable(other, {k: v for k, v in state.items() if k.startswith("head.")})


@pytest.mark.parametrize(("part", "steps"), [("lora", 2), ("top", 2), ("lora", 1), ("top", 1)])
def test_vectorized_clipped_sums_match_a_loop_over_users(part: str, steps: int) -> None:
    """4 users holding 1-3 documents, 1 or 2 local steps, through the encoder's top layer and the head
    with an affine M1: the vectorized sum equals the per-user loop, and some users are clipped (the
    clip binds) while others are not. One step of LoRA (every trainable parameter in a linear layer)
    takes the ghost-norm path over tokens; the others vmap over users."""
    torch.manual_seed(1)
    matrix = torch.randn(385, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(1)) * 0.1
    model = _model(part, 1, matrix)
    h, m = lower_states(encoder_cfg(part).encoder, TEXTS)
    owner = torch.tensor([0, 0, 1, 2, 2, 2, 3])
    clip, lr = 0.05, 0.5
    _, norms_ref = loop_reference(model, (h, m), LABELS, owner, 4, steps, lr, 1e9)
    clip = sorted(norms_ref)[1] * 1.01  # binds for two users, not for the other two
    want, norms_want = loop_reference(model, (h, m), LABELS, owner, 4, steps, lr, clip)
    hs, ys, mask = pad_by_user(h, LABELS, owner, 4)
    ms, _, _ = pad_by_user(m, LABELS, owner, 4)
    got, norms = clipped_update_sum(model, (hs, ms), ys, mask, steps=steps, lr=lr, clip=clip, chunk=3)
    assert set(got) == set(want)
    assert torch.allclose(norms, torch.tensor(norms_want), rtol=1e-3, atol=1e-7)  # float32, two steps
    assert sum(n > clip for n in norms_want) == 2
    for k in want:
        assert torch.allclose(got[k], want[k], rtol=1e-3, atol=1e-6), k
    total = torch.cat([v.reshape(-1) for v in got.values()]).norm()
    assert total <= clip * 4 * (1 + 1e-6)
    # the node's path: users by length, each chunk's tokens trimmed to its longest document (chunk 2:
    # the two chunks have different widths); the same sum
    trimmed = clipped_encoder_sum(model, h, m, LABELS, owner, 4, steps=steps, lr=lr, clip=clip, chunk=2)
    for k in want:
        assert torch.allclose(trimmed[k], want[k], rtol=1e-3, atol=1e-6), k


def test_evaluation_batches_by_length_and_reuses_the_lower_layers(monkeypatch: pytest.MonkeyPatch) -> None:
    """The evaluation path (length-sorted batches, the lower layers' states cached per process)
    predicts what the model predicts on the padded states, in the order of the texts; the second
    call runs no lower layer; over the cache's size limit nothing is kept."""
    encoder, model = encoder_cfg("lora").encoder, _model("lora")
    batches = lower_batches(encoder, TEXTS, "cpu", batch_size=3)
    assert sorted(torch.cat([rows for rows, _, _ in batches]).tolist()) == list(range(len(TEXTS)))
    assert all(m.shape[1] == int(m.sum(1).max()) for _, _, m in batches)  # trimmed to each batch's longest
    with torch.no_grad():
        want = model(*lower_states(encoder, TEXTS)).argmax(dim=1)
    encoder_training._eval_cache.clear()
    assert torch.equal(encoder_predictions(encoder, model, TEXTS, "cpu"), want)
    calls = []
    monkeypatch.setattr(encoder_training, "lower_batches", lambda *a, **k: calls.append(a) or [])
    assert torch.equal(encoder_predictions(encoder, model, TEXTS, "cpu"), want)  # from the cache
    assert not calls
    monkeypatch.undo()
    assert torch.equal(encoder_predictions(encoder, model, TEXTS[::-1], "cpu"), want.flip(0))
    assert len(encoder_training._eval_cache) == 2  # a worker keeps every node's set while they fit
    one = encoder_training._nbytes(encoder_training._eval_cache[next(iter(encoder_training._eval_cache))])
    monkeypatch.setattr(encoder_training, "EVAL_CACHE_BYTES", one)
    encoder_predictions(encoder, model, TEXTS[:3], "cpu")
    assert (
        len(encoder_training._eval_cache) == 1
        and encoder_training._nbytes(next(iter(encoder_training._eval_cache.values()))) <= one
    )  # the oldest dropped to make room
    encoder_training._eval_cache.clear()
    monkeypatch.setattr(encoder_training, "EVAL_CACHE_BYTES", 0)
    assert torch.equal(encoder_predictions(encoder, model, TEXTS, "cpu"), want)
    assert not encoder_training._eval_cache  # too large to keep: recomputed next time
