"""Layer-wise boundary-embedding exchange over ``torch.distributed`` (gloo), autograd-correct.

:meth:`HaloExchange.exchange` takes this rank's inner rows ``h`` ``(n_in, D)`` of one
layer and returns its halo rows ``(n_halo, D)``: every rank sends ``h[send[p]]`` to each
peer ``p`` and receives its halo block from each owner ``q`` (Sylvie's ring: in round
``i = 1 .. P-1`` send to ``(rank + i) % P`` and receive from ``(rank - i) % P``, with
``isend``/``irecv`` so no rank waits on another's send). Rows travel encoded by
:class:`graphpipe.train.partition_parallel.quantized.RowCodec` (float32, or per-row
1/2/4/8-bit codes).

Backward runs the same exchange the other way: the gradient of each halo row goes back
to its owner (encoded with the row's width, as Sylvie quantizes embedding gradients like
the embeddings), and the owner **adds** it into the gradient of the row it sent
(``grad[send[p]] += decoded``). With float32 rows the result is the full graph's
gradient exactly (up to summation order).

Every rank must call :meth:`exchange` for the same layers in the same order (all do: the
model is the same everywhere). Byte counters (:class:`ExchangeStats`) add the size of
every buffer handed to ``isend`` and of every buffer filled by ``irecv``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.distributed as dist

from .partition import LocalPartition
from .quantized import RowCodec, row_bits

__all__ = ["ExchangeStats", "HaloExchange"]


@dataclass
class ExchangeStats:
    """Bytes and messages moved, per phase (``"forward"``, ``"backward"``, ``"eval"``).

    Attributes:
        sent: phase -> bytes handed to ``isend``.
        received: phase -> bytes of the buffers ``irecv`` filled.
        messages: phase -> number of ``isend`` calls.
    """

    sent: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    received: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    messages: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def total_sent(self, phases: tuple[str, ...] = ("forward", "backward")) -> int:
        return sum(self.sent.get(p, 0) for p in phases)

    def reset(self) -> None:
        self.sent.clear()
        self.received.clear()
        self.messages.clear()


class HaloExchange:
    """Exchange of one rank's boundary rows with its peers.

    Args:
        part: this rank's :class:`LocalPartition` (``part.rank`` must be this process's
            rank in ``group``).
        bits: 32 (float32), 1, 2, 4, 8 or ``"auto"`` (degree-ranked, see
            :mod:`.quantized`).
        seed: base seed of the stochastic rounding.
        group: the process group (default: the world).

    One rank holding the whole path 0 - 1 - 2 has no halo; the counters stay at zero
    (tests/train/partition_parallel/test_exchange.py runs three ranks):

    >>> import numpy as np, torch, torch.distributed as dist
    >>> from graphpipe.train.partition_parallel import local_partition
    >>> from graphpipe.train.partition_parallel.launch import free_port
    >>> dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_port()}",
    ...                         rank=0, world_size=1)
    >>> part = local_partition(np.array([0, 1, 3, 4]), np.array([1, 0, 2, 1]), np.zeros(3, int), 0, 1)
    >>> ex = HaloExchange(part, bits=4)
    >>> ex.exchange(torch.ones(3, 2, requires_grad=True), layer=1).shape, ex.stats.total_sent()
    (torch.Size([0, 2]), 0)
    >>> dist.destroy_process_group()
    """

    def __init__(self, part: LocalPartition, bits: int | str = 32, *, seed: int = 0,
                 group: dist.ProcessGroup | None = None):
        self.part, self.bits, self.group, self.seed = part, bits, group, int(seed)
        self.rank, self.world = part.rank, part.num_parts
        if dist.get_rank(group) != self.rank or dist.get_world_size(group) != self.world:
            raise ValueError(f"partition {self.rank} of {self.world} does not match process "
                             f"{dist.get_rank(group)} of {dist.get_world_size(group)}")
        degree = part.in_degree + 1  # Sylvie ranks by in-degree with the self loop added
        n_in = part.num_inner
        self.send_idx = [torch.from_numpy(s) for s in part.send]
        self.send_bits = [row_bits(bits, degree[s]) for s in part.send]
        self.recv_bits = [row_bits(bits, degree[n_in + np.arange(part.num_halo)[part.recv_slice(q)]])
                          for q in range(self.world)]
        self._codecs: dict[tuple[str, int, int], RowCodec] = {}
        self.stats = ExchangeStats()
        self._calls = 0

    # ------------------------------------------------------------------ codecs and rounds
    def codec(self, side: str, peer: int, dim: int) -> RowCodec:
        """The codec of the rows sent to (``side="send"``) or received from (``"recv"``)
        ``peer`` at width ``dim``."""
        key = (side, peer, dim)
        if key not in self._codecs:
            widths = self.send_bits[peer] if side == "send" else self.recv_bits[peer]
            self._codecs[key] = RowCodec(widths, dim)
        return self._codecs[key]

    def _rounds(self) -> list[tuple[int, int]]:
        return [((self.rank + i) % self.world, (self.rank - i) % self.world)
                for i in range(1, self.world)]

    def _swap(self, outgoing: torch.Tensor, to: int, incoming_bytes: int, frm: int,
              phase: str, tag: int) -> torch.Tensor:
        """Send ``outgoing`` to ``to`` while receiving ``incoming_bytes`` from ``frm``."""
        incoming = torch.empty(incoming_bytes, dtype=torch.uint8)
        works = []
        if outgoing.numel():
            works.append(dist.isend(outgoing, to, group=self.group, tag=tag))
            self.stats.sent[phase] += outgoing.numel()
            self.stats.messages[phase] += 1
        if incoming_bytes:
            works.append(dist.irecv(incoming, frm, group=self.group, tag=tag))
        for work in works:
            work.wait()
        self.stats.received[phase] += incoming.numel()
        return incoming

    def _seed(self, peer: int, phase: int) -> int:
        return (self.seed * 1_000_003 + self._calls * 7919 + self.rank * 131 + peer * 17
                + phase) % (1 << 62)

    # ------------------------------------------------------------------ the two directions
    def forward_rows(self, h: torch.Tensor, phase: str = "forward", tag: int = 0) -> torch.Tensor:
        """Halo rows ``(n_halo, D)`` float32 (no autograd)."""
        self._calls += 1
        h = h.detach()
        dim = int(h.shape[1])
        halo = torch.empty(self.part.num_halo, dim, dtype=torch.float32)
        for to, frm in self._rounds():
            send = self.codec("send", to, dim)
            payload = send.encode(h.index_select(0, self.send_idx[to]), self._seed(to, 0))
            recv = self.codec("recv", frm, dim)
            buffer = self._swap(payload, to, recv.nbytes, frm, phase, tag)
            halo[self.part.recv_slice(frm)] = recv.decode(buffer)
        return halo.to(h.dtype)

    def backward_rows(self, grad_halo: torch.Tensor, tag: int = 1) -> torch.Tensor:
        """Gradient of the inner rows ``(n_in, D)`` from the halo gradient ``(n_halo, D)``."""
        self._calls += 1
        dim = int(grad_halo.shape[1])
        grad = torch.zeros(self.part.num_inner, dim, dtype=torch.float32)
        for owner, peer in self._rounds():  # halo of `owner` goes back; `peer` sends ours
            back = self.codec("recv", owner, dim)
            payload = back.encode(grad_halo[self.part.recv_slice(owner)], self._seed(owner, 1))
            mine = self.codec("send", peer, dim)
            buffer = self._swap(payload, owner, mine.nbytes, peer, "backward", tag)
            grad.index_add_(0, self.send_idx[peer], mine.decode(buffer))
        return grad.to(grad_halo.dtype)

    def exchange(self, h: torch.Tensor, layer: int = 0,
                 on_grad: Callable[[torch.Tensor], None] | None = None) -> torch.Tensor:
        """Halo rows of ``h`` ``(n_in, D)`` -> ``(n_halo, D)``, differentiable: backward sends
        the halo gradient to the owners. ``on_grad`` (if given) sees the inner-row gradient
        that backward produced (the staleness cache keeps it)."""
        if not torch.is_grad_enabled() or not h.requires_grad:
            return self.forward_rows(h, "forward" if torch.is_grad_enabled() else "eval",
                                     tag=2 * layer)
        return _Exchange.apply(h, self, 2 * layer, on_grad)


class _Exchange(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h, exchange: HaloExchange, tag: int, on_grad):
        ctx.exchange, ctx.tag, ctx.on_grad = exchange, tag, on_grad
        return exchange.forward_rows(h, "forward", tag)

    @staticmethod
    def backward(ctx, grad_halo):
        grad = ctx.exchange.backward_rows(grad_halo.contiguous(), ctx.tag + 1)
        if ctx.on_grad is not None:
            ctx.on_grad(grad.detach())
        return grad, None, None, None
