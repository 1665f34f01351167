"""The encoder trained under user-level central DP (``central-train = "encoder"``).

The model both ends hold is :class:`EncoderClassifier`: the top ``tuning-layers`` transformer
layers of the run's encoder (trainable outright, ``central-tuning-part = "top"``, or frozen with
trainable LoRA adapters on their query and value projections, ``"lora"``, the default), mean pooling and
normalisation as in sentence-transformers, the public M1 and the server model (M2 +
classifier). The layers below are frozen: a node runs them once per document, without
gradients (:func:`lower_states`), and the per-user updates (``fl.training.user_updates``, vectorized
over users) flow through the top layers and the head only.

What crosses: the server sends the *trainable* parameters only (:func:`trainable_state`: the
adapters and the head, not the frozen encoder every node already holds, checked by digest
when it was tuned); a node replies with the sum of its sampled users' clipped updates of the
same parameters. Each user's update is computed from the global model on that user's own
documents and clipped over all trainable parameters together, so the accounting is the
user-level DP-FedAvg accounting of the head-only mode, unchanged.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar, cast

import torch
from torch import nn

from fl.config import EncoderConfig
from fl.encoding.encoder import load_encoder
from fl.encoding.public_tuning import lora_config, top_layers, transformer_layers
from fl.maps.pipeline import ServerModel


def _extended_mask(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """BERT's additive attention mask [n, 1, 1, T] from a 0/1 token mask [n, T]."""
    return (1.0 - mask[:, None, None, :].to(dtype)) * torch.finfo(dtype).min


def _eager(layer: nn.Module) -> nn.Module:
    """A layer whose attention is plain matmul-softmax (vmap-friendly); the same function as SDPA."""
    attention = getattr(getattr(layer, "attention", None), "self", None)
    layer_config = getattr(attention, "config", None)
    if attention is not None and layer_config is not None:
        layer_config = copy.copy(layer_config)
        layer_config._attn_implementation = "eager"
        attention.config = layer_config
    return layer


class EncoderClassifier(nn.Module):
    """Top encoder layers + mean pooling + normalise + M1 + normalise + the server model.

    Input: the frozen lower layers' hidden states ``h`` [n, T, H] and the token mask [n, T];
    output: logits [n, K]. ``matrix`` is M1 ([d, m'], or affine [d + 1, m']) or ``None``."""

    matrix: torch.Tensor | None  # a buffer (register_buffer below): declared for the type checker

    def __init__(self, top: Sequence[nn.Module], head: ServerModel, matrix: torch.Tensor | None) -> None:
        super().__init__()
        self.top = nn.ModuleList([_eager(layer) for layer in top])
        self.head = head
        self.register_buffer("matrix", None if matrix is None else matrix.detach().to(torch.float32))

    def embed(self, h: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The encoder's sentence embedding G(x) (unit norm) from the lower layers' states."""
        extended = _extended_mask(mask, h.dtype)
        for layer in self.top:
            h = layer(h, extended)
        m = mask.to(h.dtype).unsqueeze(-1)
        pooled = (h * m).sum(-2) / m.sum(-2).clamp_min(1e-9)
        return nn.functional.normalize(pooled, dim=-1)

    def features(self, h: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """n(M1 G(x)) (or n(M1 G(x) + b)), with gradients."""
        x = self.embed(h, mask)
        if self.matrix is not None:
            m = self.matrix
            x = x @ m[:-1] + m[-1] if m.shape[0] == x.shape[-1] + 1 else x @ m
        return nn.functional.normalize(x, dim=-1)

    def forward(self, h: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(h, mask))


def build_encoder_classifier(
    encoder: EncoderConfig,
    head: ServerModel,
    matrix: torch.Tensor | None,
    device: str = "cpu",
    *,
    tuning_part: str,
    seed: int,
) -> EncoderClassifier:
    """The trainable model of ``central-train = "encoder"`` from the run's encoder (``encoder.encoder``:
    the published public-tuned folder or the base encoder): copies of its top ``tuning-layers``
    layers (LoRA adapters added for ``central-tuning-part = "lora"``, the adapters' start seeded by ``seed``:
    LoRA's B starts at zero, so the start is the encoder itself), ``head`` and M1.

    Parameters
    ----------
    encoder : EncoderConfig
        The encoder section the nodes embed with (where the encoder was tuned, the published one:
        :func:`fl.encoding.public_tuning.tuned_encoder`): ``encoder`` (name or folder), ``tuning-layers``
        (how many top layers are copied) and ``tuning-lora-rank`` (the adapters' rank).
    head : ServerModel
        The server model (M2 + classifier) on top of M1; used as is, not copied.
    matrix : torch.Tensor or None
        M1 ([d, m'], or affine [d + 1, m']), or ``None`` for no input map.
    device : str
        Where the encoder is loaded and the model placed.
    tuning_part : str
        ``central-tuning-part`` (``cfg.central.central_tuning_part``): ``"lora"`` (frozen layers, trainable
        adapters on their query and value projections) or ``"top"`` (the layers themselves trainable); any
        other value raises ``ValueError``.
    seed : int
        The run's ``seed`` (``cfg.users.seed``): seeds the adapters' initialisation (torch's global
        generator is left as it was).
    """
    sentence_encoder = load_encoder(encoder.encoder, device)
    top = nn.ModuleList([copy.deepcopy(layer) for layer in top_layers(sentence_encoder, int(encoder.tuning_layers))])
    for p in top.parameters():
        p.requires_grad_(tuning_part == "top")
    if tuning_part == "lora":
        from peft import inject_adapter_in_model

        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(seed))
            # peft injects the adapters in place and returns the model it was given (typed as a plain Module).
            top = cast(nn.ModuleList, inject_adapter_in_model(lora_config(int(encoder.tuning_lora_rank)), top))
        for name, p in top.named_parameters():
            p.requires_grad_("lora_" in name)
    elif tuning_part != "top":
        raise ValueError(f"central-tuning-part must be 'top' or 'lora', got {tuning_part!r}")
    return EncoderClassifier(list(top), head, matrix).to(device).eval()


def trainable_state(model: nn.Module) -> dict[str, torch.Tensor]:
    """The trainable parameters by name (detached, CPU): what the server sends and the nodes sum."""
    return {k: v.detach().cpu() for k, v in model.named_parameters() if v.requires_grad}


ModuleT = TypeVar("ModuleT", bound=nn.Module)


def load_trainable(model: ModuleT, arrays: Mapping[str, torch.Tensor]) -> ModuleT:
    """Set ``model``'s trainable parameters from ``arrays``; ``ValueError`` unless the names match exactly."""
    params = {k: p for k, p in model.named_parameters() if p.requires_grad}
    if set(arrays) != set(params):
        missing, extra = sorted(set(params) - set(arrays)), sorted(set(arrays) - set(params))
        raise ValueError(
            f"the model arrays do not match the trainable parameters (missing {missing[:3]}, extra {extra[:3]})"
        )
    with torch.no_grad():
        for k, p in params.items():
            p.copy_(torch.as_tensor(arrays[k]).to(p.device, p.dtype))
    return model


def _lower_stack(encoder: EncoderConfig, device: str) -> tuple[Any, list[nn.Module]]:
    """The encoder's BERT module (a transformers model: ``embeddings``, ``config``) and its frozen lower
    layers (all but the top ``tuning-layers``) of the encoder section's ``encoder``, loaded on ``device``."""
    sentence_encoder = load_encoder(encoder.encoder, device)
    stack = transformer_layers(sentence_encoder)
    bert = sentence_encoder[0].auto_model
    return bert, list(stack)[: len(stack) - len(top_layers(sentence_encoder, int(encoder.tuning_layers)))]


@torch.no_grad()
def lower_batches(
    encoder: EncoderConfig, texts: Sequence[str], device: str = "cpu", batch_size: int = 256
) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """The frozen lower layers' output for ``texts`` as batches ``(rows, h, mask)``: ``rows`` the
    batch's indices into ``texts`` (in order of token count, so a batch holds similar lengths),
    ``h`` [b, t, H] and ``mask`` [b, t] trimmed to the batch's longest text (truncated at the
    encoder's max_seq_length). Every text is in exactly one batch.

    ``encoder`` is the run's encoder section (``cfg.encoder``): its ``encoder`` (name or folder) and
    ``tuning-layers`` (the top layers left out: those are trained) decide the lower layers; ``device`` is
    where they run, ``batch_size`` the most texts per batch."""
    bert, lower = _lower_stack(encoder, device)
    features = load_encoder(encoder.encoder, device).preprocess(list(texts)) if texts else None
    if features is None:
        return []
    ids, mask = features["input_ids"].to(device), features["attention_mask"].to(device)
    types = features.get("token_type_ids")
    types = None if types is None else types.to(device)
    order = torch.argsort(mask.sum(1), stable=True)
    out = []
    for start in range(0, len(texts), batch_size):
        rows = order[start : start + batch_size]
        width = int(mask[rows].sum(1).max())
        m = mask[rows, :width]
        t = None if types is None else types[rows, :width]
        h = bert.embeddings(input_ids=ids[rows, :width], token_type_ids=t)
        extended = _extended_mask(m, h.dtype)
        for layer in lower:
            h = layer(h, extended)
        out.append((rows, h, m))
    return out


def lower_states(
    encoder: EncoderConfig, texts: Sequence[str], device: str = "cpu", batch_size: int = 256
) -> tuple[torch.Tensor, torch.Tensor]:
    """The frozen lower layers' hidden states [n, T, H] and token masks [n, T] of ``texts`` (padded to
    the longest; truncated at the encoder's max_seq_length): the input of :class:`EncoderClassifier`.

    ``encoder`` is the run's encoder section (``cfg.encoder``: ``encoder`` and ``tuning-layers``), ``device``
    where the layers run, ``batch_size`` as in :func:`lower_batches`."""
    bert, _ = _lower_stack(encoder, device)
    hidden_size = int(bert.config.hidden_size)
    batches = lower_batches(encoder, texts, device, batch_size)
    if not batches:
        return torch.zeros(0, 1, hidden_size, device=device), torch.zeros(0, 1, dtype=torch.int64, device=device)
    longest = max(m.shape[1] for _, _, m in batches)
    hidden = torch.zeros(len(texts), longest, hidden_size, device=device)
    mask = torch.zeros(len(texts), longest, dtype=batches[0][2].dtype, device=device)
    for rows, h, m in batches:
        hidden[rows, : m.shape[1]] = h
        mask[rows, : m.shape[1]] = m
    return hidden, mask


# Evaluation texts (each node's test users) are the same every round and the lower layers are frozen:
# their lower-layer states are kept per process (a worker serves many nodes), the oldest dropped past
# EVAL_CACHE_BYTES; a set larger than that is recomputed each round.
EVAL_CACHE_BYTES = 512 * 2**20
_eval_cache: dict[tuple[Any, ...], list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]] = {}


def _nbytes(batches: Sequence[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]) -> int:
    return sum(h.numel() * h.element_size() for _, h, _ in batches)


def _eval_batches(
    encoder: EncoderConfig, texts: Sequence[str], device: str
) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """:func:`lower_batches` of ``texts``, through the per-process cache (keyed by the encoder section's
    ``encoder`` and ``tuning-layers``, ``device`` and the texts)."""
    key = (encoder.encoder, int(encoder.tuning_layers), device, len(texts), hash(tuple(texts)))
    if key in _eval_cache:
        return _eval_cache[key]
    batches = lower_batches(encoder, texts, device)
    size = _nbytes(batches)
    if size <= EVAL_CACHE_BYTES:
        while _eval_cache and size + sum(_nbytes(b) for b in _eval_cache.values()) > EVAL_CACHE_BYTES:
            del _eval_cache[next(iter(_eval_cache))]  # the oldest first
        _eval_cache[key] = batches
    return batches


@torch.no_grad()
def encoder_predictions(
    encoder: EncoderConfig, model: EncoderClassifier, texts: Sequence[str], device: str
) -> torch.Tensor:
    """``model``'s predicted classes for ``texts`` (CPU int64, in the order of ``texts``): the lower
    layers' states come from a per-process cache (:data:`EVAL_CACHE_BYTES`), so from the second round
    on only the top layers and the head run, on length-sorted batches.

    ``encoder`` is the run's encoder section (``cfg.encoder``: ``encoder`` and ``tuning-layers``, as ``model``
    was built from), ``device`` where the lower layers and ``model`` run."""
    pred = torch.zeros(len(texts), dtype=torch.int64)
    for rows, h, m in _eval_batches(encoder, texts, device):
        pred[rows.cpu()] = model(h, m).argmax(dim=1).cpu()
    return pred


def clipped_encoder_sum(
    model: EncoderClassifier,
    h: torch.Tensor,
    tokens: torch.Tensor,
    y: torch.Tensor,
    owner: torch.Tensor,
    num_users: int,
    *,
    steps: int,
    lr: float,
    clip: float,
    chunk: int = 32,
    proximal_mu: float = 0.0,
) -> dict[str, torch.Tensor]:
    """Sum over users of their clipped updates of ``model``'s trainable parameters
    (:func:`fl.training.user_updates.clipped_update_sum`, vectorized over users), users taken ``chunk`` at a
    time in order of their longest document, each chunk's tokens trimmed to its own longest: the same
    sum (each user's clip is its own), a fraction of the padded arithmetic.

    ``h`` [n, T, H] and ``tokens`` [n, T] from :func:`lower_states`, ``y`` [n], ``owner`` [n] in
    [0, num_users)."""
    from fl.training.user_updates import clipped_update_sum, pad_by_user

    hs, ys, mask = pad_by_user(h, y, owner, num_users)
    ms = pad_by_user(tokens, y, owner, num_users)[0]
    length = ms.sum(-1).amax(-1)  # each user's longest document, in tokens
    order = torch.argsort(length, stable=True)
    total = {k: torch.zeros_like(p) for k, p in model.named_parameters() if p.requires_grad}
    for start in range(0, num_users, chunk):
        rows = order[start : start + chunk]
        width = max(1, int(length[rows].max()))
        part, _ = clipped_update_sum(
            model,
            (hs[rows, :, :width], ms[rows, :, :width]),
            ys[rows],
            mask[rows],
            steps=steps,
            lr=lr,
            clip=clip,
            chunk=chunk,
            proximal_mu=proximal_mu,
        )
        for k, v in part.items():
            total[k] += v
    return total
