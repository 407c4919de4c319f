"""Cluster-aware sequence parallelism for the graph transformers (TorchGT §4, DeepSpeed-Ulysses).

One node-level sequence (``B == 1``) of ``S`` positions, in the
:class:`~graphpipe.loaders.cluster.ClusterLoader`'s METIS cluster order (global token at
position 0), is cut into ``P`` contiguous chunks: rank ``r`` holds positions
``[r·S/P, (r+1)·S/P)`` (the loader pads ``S`` to a multiple of ``P``,
``pad_multiple=P``). Embeddings, layer norms, feed-forward blocks and heads act per
position, so each rank runs them on its chunk only. Around every attention:

1. ``q, k, v`` of the chunk, ``(S/P, H, D)``, go through one all-to-all from
   *sequence-sharded* to *head-sharded*: each rank then holds ``(S, H/P, D)``, the whole
   sequence for heads ``[r·H/P, (r+1)·H/P)``;
2. the rank runs the existing kernels over the whole pattern for its heads
   (:func:`graphpipe.train.sequence_attention.attend`: sparse, cluster-sparse or dense;
   the Graphormer bias is sliced to the rank's heads before it is gathered);
3. a second all-to-all takes ``(S, H/P, D)`` back to ``(S/P, H, D)``.

Both all-to-alls are :class:`torch.autograd.Function` s whose backward pass is the
reverse all-to-all, so the backward pass exchanges the same volume: per layer and
direction each rank sends ``4·(S/P)·d`` elements (``3`` for q, k, v in one call, ``1``
for the output), ``(P-1)/P`` of them to other ranks; there is no all-gather of q, k or v
(:class:`HeadExchange` counts them).

**Loss and gradients.** Every rank's loss is the cross-entropy *sum* over its labelled
positions divided by the labelled count of the whole sequence (all-reduced), and after
the backward pass the parameter gradients are summed over ranks
(:func:`all_reduce_gradients`): exactly the gradient of one process's mean loss over
the sequence. An explicit all-reduce, not DistributedDataParallel: DDP's bucket
all-reduces fire from autograd hooks while the attention's backward all-to-alls run on
the same group, and collectives issued in different orders on different ranks deadlock.

Every rank builds the same batch (same store, seed and METIS result);
:func:`check_same_batch` compares them once per step. Process groups are plain
``torch.distributed`` (gloo on the CPU) from the ``env://`` variables torchrun sets
(:func:`init_from_env`), or spawned on loopback (:func:`spawn_local`).

>>> import numpy as np, torch
>>> from graphpipe.loaders import ClusterLoader
>>> from graphpipe.train import build_model
>>> n = 30                                       # a ring: node i hears from i - 1 and i + 1
>>> indptr = np.arange(0, 2 * n + 1, 2)
>>> indices = np.sort(np.stack([(np.arange(n) - 1) % n, (np.arange(n) + 1) % n], 1), 1).ravel()
>>> x = np.random.default_rng(0).normal(size=(n, 4)).astype(np.float32)
>>> loader = ClusterLoader((indptr, indices, x, np.arange(n) % 3), seq_len=16,
...                        input_nodes=None, parts=2)
>>> batch = next(iter(loader))
>>> _ = torch.manual_seed(0)
>>> model = build_model("graphormer", 4, 16, 3, 2, heads=4, dropout=0.0, input_dropout=0.0)
>>> exchange = HeadExchange()           # no process group: P = 1, the exchange is the identity
>>> logits = parallel_forward(model, batch, exchange)
>>> torch.allclose(logits, model(batch))
True
>>> exchange.world, exchange.head_slice(4)
(1, slice(0, 4, None))
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import torch
import torch.distributed as dist
from torch.nn import functional as F

from graphpipe.train.distributed import free_port, init_process_group, launch
from graphpipe.train.sequence_attention import AttentionContext, attend

__all__ = [
    "CommStats",
    "HeadExchange",
    "all_reduce_gradients",
    "broadcast_parameters",
    "check_same_batch",
    "free_port",
    "init_from_env",
    "parallel_forward",
    "parallel_loss",
    "shard_batch",
    "spawn_local",
]

IGNORE_INDEX = -100


# =========================================================================== all-to-all


@dataclass
class CommStats:
    """All-to-all traffic of one rank: calls, elements and bytes it sent (its own block
    included) and ``remote_bytes``, the part that left the rank (``(P-1)/P``)."""

    calls: int = 0
    elements: int = 0
    bytes: int = 0
    remote_bytes: int = 0

    def add(self, send: torch.Tensor, world: int) -> None:
        self.calls += 1
        self.elements += send.numel()
        nbytes = send.numel() * send.element_size()
        self.bytes += nbytes
        self.remote_bytes += nbytes * (world - 1) // world

    def reset(self) -> None:
        self.calls = self.elements = self.bytes = self.remote_bytes = 0


class _SeqToHeads(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, exchange: HeadExchange) -> torch.Tensor:
        ctx.exchange = exchange
        return exchange._seq_to_heads(x, exchange.forward_stats)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        ex = ctx.exchange
        return ex._heads_to_seq(grad.contiguous(), ex.backward_stats), None


class _HeadsToSeq(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, exchange: HeadExchange) -> torch.Tensor:
        ctx.exchange = exchange
        return exchange._heads_to_seq(x, exchange.forward_stats)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        ex = ctx.exchange
        return ex._seq_to_heads(grad.contiguous(), ex.backward_stats), None


class HeadExchange:
    """The Ulysses all-to-alls of one sequence-parallel group (``group``: a
    ``torch.distributed`` process group, the default one when initialised; without any,
    ``P = 1`` and every exchange is the identity).

    Attributes:
        rank, world: this rank and P.
        forward_stats, backward_stats: :class:`CommStats` of the forward and backward
            all-to-alls since the last :meth:`reset_stats`.
    """

    def __init__(self, group: Any = None):
        self.group = group
        if dist.is_available() and dist.is_initialized():
            self.rank, self.world = dist.get_rank(group), dist.get_world_size(group)
        elif group is not None:
            raise ValueError("'group' given but torch.distributed is not initialised")
        else:
            self.rank, self.world = 0, 1
        self.forward_stats, self.backward_stats = CommStats(), CommStats()

    # -- public -----------------------------------------------------------------------------
    def head_slice(self, heads: int) -> slice:
        """The heads this rank attends with: ``[rank·H/P, (rank+1)·H/P)``."""
        if heads % self.world:
            raise ValueError(f"sequence parallelism over P={self.world} ranks needs the heads "
                             f"to divide evenly: {heads} heads is not a multiple of {self.world}")
        per = heads // self.world
        return slice(self.rank * per, (self.rank + 1) * per)

    def seq_to_heads(self, x: torch.Tensor) -> torch.Tensor:
        """``(S/P, G, H, D)`` sequence-sharded → ``(S, G, H/P, D)`` head-sharded (autograd:
        the backward pass is :meth:`heads_to_seq`)."""
        self._check(x)
        self.head_slice(x.shape[2])
        return x if self.world == 1 else _SeqToHeads.apply(x, self)

    def heads_to_seq(self, x: torch.Tensor) -> torch.Tensor:
        """``(S, G, H/P, D)`` head-sharded → ``(S/P, G, H, D)`` sequence-sharded (the
        inverse of :meth:`seq_to_heads`)."""
        self._check(x)
        if x.shape[0] % self.world:
            raise ValueError(f"'x' has {x.shape[0]} positions, not a multiple of P={self.world}")
        return x if self.world == 1 else _HeadsToSeq.apply(x, self)

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, ctx: AttentionContext,
               bias: torch.Tensor | None = None) -> torch.Tensor:
        """Attention of the chunk's ``q, k, v (S/P, H, D)`` over the whole sequence:
        all-to-all, :func:`~graphpipe.train.sequence_attention.attend` for this rank's
        heads (``bias`` already sliced to them, :func:`score_bias` does it), all-to-all
        back. Returns ``(S/P, H, D)``."""
        heads = self.seq_to_heads(torch.stack((q, k, v), 1))          # (S, 3, H/P, D)
        qh, kh, vh = (t.contiguous() for t in heads.unbind(1))
        out = attend(qh, kh, vh, replace(ctx, exchange=None), bias)    # (S, H/P, D)
        return self.heads_to_seq(out[:, None]).squeeze(1)

    def reset_stats(self) -> None:
        self.forward_stats.reset()
        self.backward_stats.reset()

    def all_reduce(self, value: torch.Tensor, op: Any = None) -> torch.Tensor:
        """``value`` reduced over the group (sum by default; in place, returned)."""
        if self.world > 1:
            dist.all_reduce(value, op=dist.ReduceOp.SUM if op is None else op, group=self.group)
        return value

    # -- the collectives --------------------------------------------------------------------
    @staticmethod
    def _check(x: torch.Tensor) -> None:
        if not isinstance(x, torch.Tensor) or x.dim() != 4:
            raise ValueError(f"'x' must be a 4-d tensor (positions, groups, heads, dim) "
                             f"(got {getattr(x, 'shape', type(x).__name__)})")

    def _all_to_all(self, send: torch.Tensor, stats: CommStats) -> torch.Tensor:
        recv = torch.empty_like(send)
        dist.all_to_all_single(recv, send, group=self.group)
        stats.add(send, self.world)
        return recv

    def _seq_to_heads(self, x: torch.Tensor, stats: CommStats) -> torch.Tensor:
        p = self.world
        n, g, h, d = x.shape
        send = x.reshape(n, g, p, h // p, d).permute(2, 0, 1, 3, 4).contiguous()
        return self._all_to_all(send, stats).reshape(p * n, g, h // p, d)  # block i: rank i's rows

    def _heads_to_seq(self, x: torch.Tensor, stats: CommStats) -> torch.Tensor:
        p = self.world
        s, g, hp, d = x.shape
        recv = self._all_to_all(x.reshape(p, s // p, g, hp, d).contiguous(), stats)
        return recv.permute(1, 2, 0, 3, 4).reshape(s // p, g, p * hp, d)   # block i: heads group i


# =========================================================================== model and loss


def shard_batch(batch: Any, rank: int, world: int) -> Any:
    """Rank ``rank``'s chunk of a :class:`~graphpipe.loaders.cluster.SequenceBatch`
    (``B == 1``): positions ``[rank·S/P, (rank+1)·S/P)`` of ``x, y, mask``, the degrees,
    ``node_ids``, ``perm``, ``inverse``; ``global_token`` only on rank 0 (it holds position
    0). The pattern tensors stay whole (every rank attends over the whole sequence)."""
    if int(batch.batch_size) != 1:
        raise ValueError(f"sequence parallelism shards one sequence (B == 1); got "
                         f"batch_size={batch.batch_size} (graph-level batches are not supported)")
    s = int(batch.seq_len)
    if s % world:
        raise ValueError(f"sequence of {s} positions does not split into P={world} equal "
                         f"chunks: build the ClusterLoader with pad_multiple={world}")
    n = s // world
    lo, hi = rank * n, (rank + 1) * n
    cut = {name: getattr(batch, name)[:, lo:hi] for name in
           ("node_ids", "x", "y", "mask", "in_degree", "out_degree", "perm", "inverse")}
    return replace(batch, **cut, spd=None, global_token=bool(batch.global_token) and rank == 0,
                   seq_len=n)


def parallel_forward(model: torch.nn.Module, batch: Any, exchange: HeadExchange,
                     attention: str | None = None,
                     context: AttentionContext | None = None) -> torch.Tensor:
    """Logits ``(1, S/P, C)`` of this rank's chunk of ``batch`` (node level): the model's
    own forward on :func:`shard_batch`'s chunk, with the whole sequence's attention
    context (``model.context(batch, attention)`` unless given) routed through
    ``exchange``."""
    if getattr(model, "level", "node") != "node":
        raise ValueError("sequence parallelism supports node-level models (level='node')")
    exchange.head_slice(int(model.heads))
    ctx = context if context is not None else model.context(batch, attention)
    local = shard_batch(batch, exchange.rank, exchange.world)
    return model(local, context=replace(ctx, exchange=exchange))


def parallel_loss(logits: torch.Tensor, local_y: torch.Tensor, exchange: HeadExchange
                  ) -> tuple[torch.Tensor, int, int]:
    """``(loss, labelled, correct)``: ``loss`` is this rank's cross-entropy sum over its
    labelled positions divided by the labelled count of the whole sequence, so the
    losses of all ranks sum to the one-process mean loss; ``labelled`` and ``correct``
    are whole-sequence counts (the same on every rank).

    Args:
        logits: ``(1, S/P, C)`` from :func:`parallel_forward`.
        local_y: int64 ``(1, S/P)`` the chunk's labels (-100: none).
    """
    target = local_y.reshape(-1).to(logits.device)
    flat = logits.reshape(-1, logits.shape[-1])
    keep = target != IGNORE_INDEX
    correct = (flat.detach()[keep].argmax(-1) == target[keep]).sum()
    counts = exchange.all_reduce(torch.stack([keep.sum(), correct]).to(torch.int64))
    total = int(counts[0])
    loss = F.cross_entropy(flat, target, ignore_index=IGNORE_INDEX, reduction="sum")
    return loss / max(total, 1), total, int(counts[1])


def all_reduce_gradients(model: torch.nn.Module, exchange: HeadExchange) -> None:
    """Sum every parameter's gradient over the group (a missing gradient counts as
    zero), one flat all-reduce per dtype."""
    if exchange.world == 1:
        return
    params = [p for p in model.parameters() if p.requires_grad]
    for dtype in sorted({p.dtype for p in params}, key=str):
        group = [p for p in params if p.dtype == dtype]
        flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1)
                          for p in group])
        exchange.all_reduce(flat)
        offset = 0
        for p in group:
            n = p.numel()
            p.grad = flat[offset:offset + n].view_as(p).clone()
            offset += n


def broadcast_parameters(model: torch.nn.Module, exchange: HeadExchange) -> None:
    """Copy rank 0's parameters and buffers to every rank (the same start everywhere)."""
    if exchange.world == 1:
        return
    with torch.no_grad():
        for t in [*model.parameters(), *model.buffers()]:
            dist.broadcast(t.data, src=0, group=exchange.group)


def _batch_digest(batch: Any) -> int:
    h = hashlib.blake2b(digest_size=7)
    for t in (batch.node_ids, batch.indptr, batch.indices, batch.edge_kind):
        h.update(t.detach().cpu().contiguous().numpy().tobytes())
    return int.from_bytes(h.digest(), "little")


def check_same_batch(batch: Any, exchange: HeadExchange) -> None:
    """Raise ``RuntimeError`` unless every rank holds the same sequence and pattern
    (node IDs, ``indptr``, ``indices``, ``edge_kind``)."""
    if exchange.world == 1:
        return
    d = _batch_digest(batch)
    lo = exchange.all_reduce(torch.tensor([d], dtype=torch.int64), dist.ReduceOp.MIN)
    hi = exchange.all_reduce(torch.tensor([d], dtype=torch.int64), dist.ReduceOp.MAX)
    if int(lo) != int(hi):
        raise RuntimeError("sequence-parallel ranks built different sequences (store, seed or "
                           "METIS differ between ranks)")


# =========================================================================== process groups


def init_from_env(timeout_s: float | None = None) -> tuple[int, int]:
    """Join the gloo process group from torchrun's ``env://`` variables (``MASTER_ADDR``,
    ``MASTER_PORT``, ``RANK``, ``WORLD_SIZE``;
    :func:`graphpipe.train.distributed.init_process_group`); returns ``(rank, world)``."""
    init_process_group("cpu", timeout_s=timeout_s)
    return dist.get_rank(), dist.get_world_size()


def spawn_local(fn: Callable[..., Any], world: int, args: tuple = ()) -> None:
    """Run ``fn(*args)`` in ``world`` spawned local ranks with torchrun's variables on a
    free loopback port (:func:`graphpipe.train.distributed.launch`); ``fn`` calls
    :func:`init_from_env`. Raises :class:`graphpipe.train.ranks.RankFailure` when a rank
    fails, is killed or is stuck (the others are ended)."""
    launch(fn, world, args)
