"""Data-parallel training on ``torch.distributed``: :class:`DistributedTrainer` (node
classification), :class:`DistributedTypedTrainer` (a typed store's target type; seed
shards only) and :class:`DistributedTypedLinkTrainer` (link prediction on one relation
of a typed store; shards of its training edges), each a :class:`DataParallel` trainer, and the process-group plumbing of
``graphpipe train --nproc N`` and ``torchrun``.

What a data-parallel run does (the :class:`~graphpipe.train.Trainer` semantics, per rank):

- **model**: wrapped in ``DistributedDataParallel`` over the process group (gloo on the
  CPU, NCCL on CUDA devices, each rank on ``cuda:LOCAL_RANK``). DDP broadcasts rank 0's
  weights when it wraps the model and averages the gradients of every step over the
  ranks, so a step on ``W`` ranks with batches ``b_0 .. b_{W-1}`` equals one step on
  the average of their losses (a batch of their union when the batches are equally
  large and nothing in the model depends on the batch). Every rank seeds torch the same
  way (same ``seed``), as single-process training does.
- **seeds**: the training loader of every rank draws the same permutation of the
  ``train`` split (the loader's ``seed`` and the epoch) and takes its shard
  (:mod:`graphpipe.loaders.shard`): ``shard="seeds"`` (DistributedSampler's split, padded
  by wrapping so that each rank runs the same number of batches; ``drop_last=True``
  drops the tail instead) or ``shard="parts"`` (the seeds of the rank's METIS parts,
  from the store's ``partition/k{K}/part``: ``graphpipe partition STORE --parts K``).
  ``batch_size`` is per rank: a step trains on ``W * batch_size`` seeds.
- **metrics**: the epoch's loss and batch accuracy are summed over all ranks' seeds
  (an all-reduce) and ``seconds`` is the slowest rank's; ``record["ranks"]`` lists each
  rank's ``steps, seeds, seconds`` and loader counters (``rows_gathered``,
  ``rows_reused``...) with the gradient all-reduces it ran (``allreduce_calls``,
  ``allreduce_bytes``, counted by a DDP communication hook around PyTorch's own
  ``allreduce_hook``); ``record["loader"]`` is rank 0's.
- **rank 0 only**: evaluation (its accuracies are broadcast, so early stopping stops
  every rank at the same epoch), the metrics log, the checkpoint and printed lines
  (``is_main``). The checkpoint holds the unwrapped module's state, so it resumes with
  any number of ranks, or in one process with a plain :class:`Trainer`, and vice versa.

:func:`launch` runs a function in ``N`` local processes the way ``torchrun`` would
(``MASTER_ADDR=127.0.0.1``, ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``; the rendezvous
store is served by the launching process on a loopback port the OS picks); :func:`init_process_group` joins the group from those variables
(``env://``), whoever set them.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import socket
import sys
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

from graphpipe.interrupt import end_process
from graphpipe.loaders import NeighborLoader
from graphpipe.loaders.shard import BaseShard, PartitionShard, SeedShard
from graphpipe.train.link import link_eval_keys
from graphpipe.train.loop import EpochSums
from graphpipe.train.ranks import (
    EXIT_PEER_LOST,
    collective_failed,
    rank_timeout_s,
    supervise,
    watch_parent,
)
from graphpipe.train.trainer import Trainer, TypedTrainer
from graphpipe.train.typed_link import TypedLinkTrainer

__all__ = ["SHARDS", "DataParallel", "DistributedTrainer", "DistributedTypedLinkTrainer",
           "DistributedTypedTrainer", "RankCounters", "TypedRanks",
           "exit_spawned_rank", "free_port", "in_turn", "init_process_group", "launch", "launched_by_torchrun", "local_rank", "stored_partition"]

SHARDS = ("seeds", "parts")
_SPLITS = ("train", "valid", "test")
_ENV = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
RANK_KEYS = ("steps", "seeds", "seconds", "allreduce_calls", "allreduce_bytes", "batches",
             "sampled_nodes", "sampled_edges", "rows_needed", "rows_gathered", "rows_reused",
             "rows_cached", "sample_s", "gather_s", "wait_s")
"""The per-rank figures of ``record["ranks"]``, in this order."""


# ----------------------------------------------------------------------------- processes
def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (for a ``tcp://`` init method or
    ``MASTER_PORT`` in tests and examples; :func:`launch` lets the OS pick its own)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def launched_by_torchrun() -> bool:
    """True when the environment names this process's rank and its group's rendezvous
    (``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``: ``torchrun`` sets them,
    and so does :func:`launch`)."""
    return all(os.environ.get(k) for k in _ENV)


def local_rank() -> int:
    """``LOCAL_RANK`` (the rank on this machine), 0 when unset."""
    return int(os.environ.get("LOCAL_RANK", "0"))


def in_turn(build: Callable[[], Any]) -> Any:
    """``build()`` on this machine's ranks one after another (``LOCAL_RANK`` order, a
    barrier of the default group after each turn), so that each rank's memory plan sees
    the memory the ranks before it took; returns this rank's result."""
    result = None
    for turn in range(int(os.environ.get("LOCAL_WORLD_SIZE", "1"))):
        if turn == local_rank():
            result = build()
        dist.barrier()
    return result


def init_process_group(device: str | torch.device = "cpu", *, timeout_s: float | None = None
                       ) -> dist.ProcessGroup:
    """Join the default process group from the environment (``env://``) unless already
    joined: gloo for a CPU ``device``, NCCL for CUDA (then ``cuda:LOCAL_RANK`` becomes the
    current device). ``timeout_s``: how long a collective (and the rendezvous) waits for
    the other ranks, default :func:`graphpipe.train.ranks.rank_timeout_s`. Returns the group."""
    if timeout_s is None:
        timeout_s = rank_timeout_s()
    if not dist.is_initialized():
        if not launched_by_torchrun():
            raise ValueError("no process group: set RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT "
                             "(torchrun does) or start the ranks with graphpipe.train.distributed.launch")
        cuda = torch.device(device).type == "cuda"
        if cuda:
            torch.cuda.set_device(local_rank())
        dist.init_process_group("nccl" if cuda else "gloo", init_method="env://",
                                timeout=datetime.timedelta(seconds=timeout_s))
    return dist.group.WORLD


def _rank_entry(index: int, fn: Callable[..., Any], nproc: int, port: int, args: tuple,
                parent: int) -> None:
    """One spawned process: tied to the launcher (:func:`graphpipe.train.ranks.watch_parent`),
    the torchrun variables, a share of the cores, then ``fn``; ends through
    :func:`exit_spawned_rank` whatever happens (:func:`_run_rank`)."""
    watch_parent(index, parent)
    os.environ.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": str(index),
                       "LOCAL_RANK": str(index), "WORLD_SIZE": str(nproc),
                       "LOCAL_WORLD_SIZE": str(nproc), "GROUP_RANK": "0",
                       "TORCHELASTIC_USE_AGENT_STORE": "True", "TORCHELASTIC_RESTART_COUNT": "0"})
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    share = max(1, (os.cpu_count() or 1) // nproc)
    if "OMP_NUM_THREADS" not in os.environ:  # N ranks share the cores, as torchrun's default
        torch.set_num_threads(share)
    if "NUMBA_NUM_THREADS" not in os.environ:  # the sampler's threads too
        import numba

        numba.set_num_threads(min(share, numba.config.NUMBA_NUM_THREADS))
    exit_spawned_rank(_run_rank(index, fn, args))


def _run_rank(index: int, fn: Callable[..., Any], args: tuple) -> int:
    """``fn(*args)``; the exit code: 0, a ``SystemExit``'s code, :data:`EXIT_PEER_LOST`
    (quiet) when a collective failed because another rank went away, else 1 after one line
    ``error: rank <i>: ...`` (the traceback too under ``GRAPHPIPE_DEBUG``)."""
    try:
        fn(*args)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException as exc:  # noqa: BLE001 - a rank reports everything, in one line
        if collective_failed(exc):
            return EXIT_PEER_LOST
        if os.environ.get("GRAPHPIPE_DEBUG", "") not in ("", "0"):
            import traceback

            traceback.print_exc()
        text = str(exc).strip().splitlines()
        print(f"error: rank {index}: {type(exc).__name__}: {text[0] if text else ''}",
              file=sys.stderr)
        return 1
    return 0


def exit_spawned_rank(code: int = 0) -> None:
    """End a spawned rank that returned normally without running interpreter finalization
    (:func:`graphpipe.interrupt.end_process`): gloo's worker threads can still hold work
    objects after ``destroy_process_group``; torn down during finalization they abort the
    process now and then (SIGABRT), which the launcher would report as a failed rank.
    ``code``: the exit status."""
    end_process(code)


@contextlib.contextmanager
def _rank_environment() -> Iterator[None]:
    """The variables spawned ranks start with: torch's C++ log at FATAL unless set or
    ``GRAPHPIPE_DEBUG`` (a rank whose peer went away would log gloo's error before the
    launcher's one line)."""
    quiet = "TORCH_CPP_LOG_LEVEL" not in os.environ and os.environ.get(
        "GRAPHPIPE_DEBUG", "") in ("", "0")
    if quiet:
        os.environ["TORCH_CPP_LOG_LEVEL"] = "FATAL"
    try:
        yield
    finally:
        if quiet:
            del os.environ["TORCH_CPP_LOG_LEVEL"]


def launch(fn: Callable[..., Any], nproc: int, args: tuple = ()) -> None:
    """Run ``fn(*args)`` in ``nproc`` new local processes (``torch.multiprocessing``,
    spawn), each with the variables ``torchrun`` sets (rank ``i`` of ``nproc``; the
    rendezvous ``TCPStore`` hosted by this process on 127.0.0.1 at a port the OS picks, as
    torchrun's agent hosts it; ``GLOO_SOCKET_IFNAME=lo`` unless set) and
    ``cores // nproc`` torch (and Numba) threads unless ``OMP_NUM_THREADS``
    (``NUMBA_NUM_THREADS``) is set; ``fn`` calls
    :func:`init_process_group`. ``fn`` must be importable (a module-level function).
    Waits for all; a rank killed, stuck or failed ends the others and raises
    :class:`graphpipe.train.ranks.RankFailure` (one line naming the rank; ranks die with
    this process: see :mod:`graphpipe.train.ranks`)."""
    import torch.multiprocessing as mp

    if isinstance(nproc, bool) or not isinstance(nproc, int) or nproc < 1:
        raise ValueError(f"'nproc' must be a positive integer (got {nproc!r})")
    # the rendezvous store lives here, on a port the OS picked, as torchrun's agent hosts it
    # (TORCHELASTIC_USE_AGENT_STORE): no free port to find and lose to another process
    store = dist.TCPStore("127.0.0.1", 0, nproc, True, wait_for_workers=False)
    context = None
    try:
        with _rank_environment():
            context = mp.start_processes(_rank_entry, nprocs=nproc, join=False, start_method="spawn",
                                         args=(fn, nproc, store.port, tuple(args), os.getpid()))
        supervise(context.processes)
    finally:
        for process in context.processes if context is not None else ():
            if process.is_alive():  # an interrupt in this process: leave no rank behind
                process.kill()
                process.join()
        del store


def stored_partition(store: Any, world_size: int) -> tuple[int, np.ndarray]:
    """``(K, part)`` of the store's METIS partition for ``world_size`` ranks: the smallest
    stored ``K`` that is a multiple of ``world_size``, else the smallest ``K >= world_size``.
    Raises ``ValueError`` when there is none."""
    from graphpipe.store.derived import partition_keys

    stored = sorted(int(name[len("partition_k"):]) for name in (store.manifest.get("derived") or {})
                    if name.startswith("partition_k") and name[len("partition_k"):].isdigit())
    stored = [k for k in stored if k >= world_size and store.has_array(partition_keys(k)["part"])]
    if not stored:
        raise ValueError(f"store {str(store.path)!r} has no partition into >= {world_size} parts: "
                         f"run 'graphpipe partition {store.path} --parts {world_size}' first")
    k = next((k for k in stored if k % world_size == 0), stored[0])
    part = np.asarray(store.array(partition_keys(k)["part"]))
    if part.shape != (store.num_nodes,) or part.dtype.kind not in "iu" or (
            part.size and (int(part.min()) < 0 or int(part.max()) >= k)):
        raise ValueError(f"store {str(store.path)!r}: 'partition/k{k}/part' is not one part in "
                         f"[0, {k}) per node")
    return k, part


# ----------------------------------------------------------------------------- counters
class RankCounters:
    """Gradient all-reduces of this rank (a DDP communication hook): calls and bytes."""

    def __init__(self) -> None:
        self.calls = 0
        self.bytes = 0

    def reset(self) -> None:
        self.calls = self.bytes = 0


def _counting_allreduce(state: tuple[RankCounters, Any], bucket):
    """PyTorch's ``allreduce_hook`` (average over the group), counting what it sends.
    (DDP checks a hook's annotations against the real classes, which this module's
    postponed annotations would turn into strings: ``bucket`` and the result are left
    unannotated; they are ``dist.GradBucket`` and ``torch.futures.Future[torch.Tensor]``.)"""
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    counters, group = state
    buffer = bucket.buffer()
    counters.calls += 1
    counters.bytes += buffer.numel() * buffer.element_size()
    return default_hooks.allreduce_hook(group, bucket)


# ----------------------------------------------------------------------------- the trainers
class DataParallel:
    """What makes a trainer one rank of a data-parallel run (see the module docstring),
    mixed in before the trainer it parallelises (:class:`DistributedTrainer`,
    :class:`DistributedTypedTrainer`): :meth:`join` before the trainer's ``__init__``,
    :meth:`wrap` after it; then the epoch's sums are all-reduced, each rank's figures
    gathered, rank 0 evaluates and writes, the checkpoint records the rank count.

    ``rank_keys``: the per-rank figures of ``record["ranks"]``; those after the first
    five come from :meth:`loader_figures`."""

    rank_keys: tuple[str, ...] = RANK_KEYS
    group: Any
    rank: int
    world_size: int
    comm: RankCounters

    def join(self, process_group: Any, kwargs: dict[str, Any]) -> None:
        """Take this rank's place in ``process_group`` (default: the initialised default
        group); ``kwargs`` (the trainer's arguments) get ``quiet`` on ranks > 0 and a CUDA
        ``device`` without index becomes ``cuda:LOCAL_RANK``."""
        if not dist.is_initialized():
            raise ValueError("torch.distributed is not initialised: call "
                             "graphpipe.train.distributed.init_process_group() first")
        self.group = process_group if process_group is not None else dist.group.WORLD
        self.rank = dist.get_rank(self.group)
        self.world_size = dist.get_world_size(self.group)
        self.is_main = self.rank == 0
        device = torch.device(kwargs.get("device", "cpu"))
        if device.type == "cuda" and device.index is None:
            kwargs["device"] = torch.device("cuda", local_rank())
        kwargs["quiet"] = bool(kwargs.get("quiet", False)) or not self.is_main

    def wrap(self, device: torch.device, *, find_unused_parameters: bool = False) -> None:
        """``forward_model``: the model in ``DistributedDataParallel``, its gradient
        all-reduces counted (:class:`RankCounters`). ``find_unused_parameters``: a model
        whose steps leave some parameters without a gradient (typed models: relations
        absent from a batch, non-target outputs of the last layer); a parameter no rank
        used keeps no gradient, as in one process."""
        from torch.nn.parallel import DistributedDataParallel

        ids = [device.index] if device.type == "cuda" else None
        self.forward_model = DistributedDataParallel(
            self.model, device_ids=ids, process_group=self.group,
            find_unused_parameters=find_unused_parameters)
        self.comm = RankCounters()
        self.forward_model.register_comm_hook((self.comm, self.group), _counting_allreduce)

    def checkpoint_extra(self) -> dict[str, Any]:
        """The trainer's ``train`` key plus the number of ranks that wrote it (not checked:
        a run resumes with any number)."""
        extra = super().checkpoint_extra()  # type: ignore[misc]
        extra["train"]["world_size"] = self.world_size
        return extra

    def start_epoch(self, epoch: int, total: int) -> None:
        """Count this epoch's gradient all-reduces from zero."""
        self.comm.reset()

    def epoch_record(self, epoch: int, sums: EpochSums) -> dict[str, Any]:
        """The record of all ranks: sums all-reduced, each rank's figures gathered."""
        total = torch.tensor([sums.loss_sum, sums.correct, sums.seen], dtype=torch.float64)
        dist.all_reduce(total, group=self.group)
        ranks = self._gather_ranks(sums.steps, sums.seen, sums.seconds)
        record = super().epoch_record(epoch, EpochSums(  # type: ignore[misc]
            float(total[0]), int(total[1]), int(total[2]), sums.steps,
            max(r["seconds"] for r in ranks)))
        record["world_size"] = self.world_size
        record["ranks"] = ranks
        return record

    def loader_figures(self) -> dict[str, float]:
        """This rank's loader counters named in ``rank_keys[5:]``."""
        stats = self.loader.stats.as_dict()  # type: ignore[attr-defined]
        return {k: stats[k] for k in self.rank_keys[5:]}

    def _gather_ranks(self, steps: int, seen: int, seconds: float) -> list[dict[str, Any]]:
        """Every rank's ``rank_keys`` figures (an all-gather of one float64 row each)."""
        own = {"steps": steps, "seeds": seen, "seconds": seconds, "allreduce_calls": self.comm.calls,
               "allreduce_bytes": self.comm.bytes, **self.loader_figures()}
        row = torch.tensor([float(own[k]) for k in self.rank_keys], dtype=torch.float64)
        rows = [torch.empty_like(row) for _ in range(self.world_size)]
        dist.all_gather(rows, row, group=self.group)
        return [{"rank": r, **{k: (float(v) if k.endswith("_s") or k == "seconds" else int(v))
                               for k, v in zip(self.rank_keys, rows[r].tolist())}}
                for r in range(self.world_size)]

    def describe_epoch(self, record: dict[str, Any]) -> str:
        """The one-process line (its loader figures are rank 0's) and every rank's rows."""
        ranks = record.get("ranks") or []
        rows = " / ".join(str(r["rows_gathered"]) for r in ranks)
        return super().describe_epoch(record) + f"  [{len(ranks)} ranks: rows gathered {rows}]"  # type: ignore[misc]

    def eval_keys(self) -> tuple[str, ...]:
        """The keys of the trainer's ``evaluate()`` (broadcast from rank 0)."""
        return _SPLITS

    def evaluate(self) -> dict[str, float]:
        """Rank 0 evaluates (the trainer's ``evaluate``); every rank gets its accuracies."""
        splits = self.eval_keys()
        accs = super().evaluate() if self.is_main else dict.fromkeys(splits, 0.0)  # type: ignore[misc]
        values = torch.tensor([accs[s] for s in splits], dtype=torch.float64)
        dist.broadcast(values, src=dist.get_global_rank(self.group, 0), group=self.group)
        return dict(zip(splits, values.tolist()))


class DistributedTrainer(DataParallel, Trainer):
    """A :class:`~graphpipe.train.Trainer` that is one rank of a data-parallel run (see the
    module docstring for what is shared, reduced and done on rank 0 only).

    Args:
        model, store: as :class:`Trainer`; build the model the same way (same seed) on
            every rank.
        process_group: the ranks training together (default: the default group, which
            must be initialised: :func:`init_process_group`).
        shard: ``"seeds"`` (each rank a DistributedSampler share of the permutation) or
            ``"parts"`` (each rank the seeds of its METIS parts; needs a stored partition
            into at least ``world_size`` parts, :func:`stored_partition`).
        drop_last: False (default): ranks short of seeds are padded by wrapping; True:
            the tail is dropped (:mod:`graphpipe.loaders.shard`).
        **kwargs: the :class:`Trainer` arguments (``batch_size`` is per rank; ``device``
            ``"cuda"`` means ``cuda:LOCAL_RANK``; ``quiet`` is forced on ranks > 0).

    Attributes:
        rank, world_size, group, is_main (rank 0), shard (the training loader's
        :class:`~graphpipe.loaders.shard.BaseShard`), forward_model (the DDP wrapper),
        comm (:class:`RankCounters` of the current epoch).

    One rank (a one-process gloo group), so it runs inside this example:

    >>> import os, tempfile
    >>> import numpy as np, torch, torch.distributed as dist
    >>> from graphpipe.ingest import ingest
    >>> from graphpipe.train import build_model
    >>> tmp = tempfile.TemporaryDirectory()
    >>> ids, nxt = np.arange(40), (np.arange(40) + 1) % 40
    >>> y = (ids // 10) % 2
    >>> np.savez(os.path.join(tmp.name, "ring.npz"), src=np.concatenate([ids, nxt]),
    ...          dst=np.concatenate([nxt, ids]), x=np.eye(2, dtype=np.float32)[y], y=y,
    ...          train_idx=ids[::2], valid_idx=ids[1::4], test_idx=ids[3::4])
    >>> store = ingest(os.path.join(tmp.name, "ring.npz"), os.path.join(tmp.name, "ring"))
    >>> dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    >>> _ = torch.manual_seed(0)
    >>> model = build_model("sage", in_dim=2, hidden=8, out_dim=2, num_layers=2)
    >>> trainer = DistributedTrainer(model, store, fanouts=[2, 2], batch_size=8, epochs=1,
    ...                              quiet=True)
    >>> trainer.rank, trainer.world_size, trainer.is_main, trainer.shard
    (0, 1, True, SeedShard(rank=0, world_size=1, drop_last=False))
    >>> record = trainer.fit().history[0]
    >>> record["steps"], [r["seeds"] for r in record["ranks"]]
    (3, [20])
    >>> sum(p.numel() for p in model.parameters()) * 4 == record["ranks"][0]["allreduce_bytes"] // 3
    True
    >>> dist.destroy_process_group(); tmp.cleanup()
    """

    def __init__(self, model: nn.Module, store: Any, *, process_group: Any = None,
                 shard: str = "seeds", drop_last: bool = False, **kwargs: Any):
        if shard not in SHARDS:
            raise ValueError(f"'shard' must be one of {', '.join(SHARDS)} (got {shard!r})")
        self.join(process_group, kwargs)
        self.shard_mode, self.drop_last = shard, bool(drop_last)
        self.shard: BaseShard | None = None
        super().__init__(model, store, **kwargs)
        self.wrap(self.device)

    def _make_shard(self) -> BaseShard:
        if self.shard_mode == "seeds":
            return SeedShard(self.rank, self.world_size, drop_last=self.drop_last)
        _k, part = stored_partition(self.store, self.world_size)
        return PartitionShard(part, self.rank, self.world_size, seeds=self._split_ids("train"),
                              drop_last=self.drop_last)

    def _make_loader(self, seed: int) -> NeighborLoader:
        if self.shard is None:
            self.shard = self._make_shard()
        self.loader_options["shard"] = self.shard  # the training loader only (not evaluation's)
        return super()._make_loader(seed)


TYPED_RANK_KEYS = ("steps", "seeds", "seconds", "allreduce_calls", "allreduce_bytes",
                   "rows_gathered", "rows_reused", "rows_cached")
"""The per-rank figures of a typed run's ``record["ranks"]`` (rows summed over node types)."""


class TypedRanks(DataParallel):
    """:class:`DataParallel` for the typed trainers: the training loader's items (the
    target type's seeds, or the relation's positive edges) sharded by a
    :class:`~graphpipe.loaders.shard.SeedShard`, the model in ``DistributedDataParallel``
    with ``find_unused_parameters`` (a batch need not reach every relation), rows per rank
    summed over node types (:data:`TYPED_RANK_KEYS`)."""

    rank_keys = TYPED_RANK_KEYS

    def __init__(self, model: nn.Module, store: Any, *, process_group: Any = None,
                 drop_last: bool = False, **kwargs: Any):
        self.join(process_group, kwargs)
        self.shard = SeedShard(self.rank, self.world_size, drop_last=drop_last)
        super().__init__(model, store, **kwargs)  # type: ignore[call-arg]
        self.wrap(torch.device("cpu"), find_unused_parameters=True)

    def loader_figures(self) -> dict[str, float]:
        """Rows of this rank's epoch summed over node types (read, reused, held)."""
        counts = self.loader.stats  # type: ignore[attr-defined]
        return {"rows_gathered": sum(counts.read.values()), "rows_reused": sum(counts.reused.values()),
                "rows_cached": sum(counts.held.values())}


class DistributedTypedTrainer(TypedRanks, TypedTrainer):
    """A :class:`~graphpipe.train.TypedTrainer` that is one rank of a data-parallel run:
    the target type's training seeds sharded by a
    :class:`~graphpipe.loaders.shard.SeedShard` (DistributedSampler's split of the one
    permutation every rank draws), the model in ``DistributedDataParallel``
    (``find_unused_parameters``: a batch need not reach every relation), sums
    all-reduced, rank 0 evaluates, logs and checkpoints (module docstring). A
    checkpoint resumes with any number of ranks, or in one process with a
    :class:`TypedTrainer`, and vice versa.

    Args:
        model, store: as :class:`TypedTrainer` (build the model the same way on every rank).
        process_group: as :class:`DistributedTrainer`.
        drop_last: False (default): ranks short of seeds are padded by wrapping; True:
            the tail is dropped.
        **kwargs: the :class:`TypedTrainer` arguments (``batch_size`` is per rank).

    One rank (a one-process gloo group), so it runs inside this example:

    >>> import tempfile
    >>> import torch, torch.distributed as dist
    >>> from graphpipe.ingest import ingest
    >>> from graphpipe.synthetic.mag import mag_dataset, write_ogb_mag
    >>> from graphpipe.train.hetero_models import build_hetero_model
    >>> from graphpipe.train.trainer import typed_model_dims, typed_training_data
    >>> tmp = tempfile.TemporaryDirectory()
    >>> data = mag_dataset(papers=60, authors=70, institutions=5, fields=8, num_classes=3,
    ...                    feature_dim=4, seed=0)
    >>> store = typed_training_data(ingest(write_ogb_mag(tmp.name + "/src", data), tmp.name + "/s"))
    >>> dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    >>> _ = torch.manual_seed(0)
    >>> model = build_hetero_model("rgcn", typed_model_dims(store), store.num_nodes_dict, 8, 3, 2,
    ...                            store.edge_types, "paper")
    >>> trainer = DistributedTypedTrainer(model, store, fanouts=[3, 3], batch_size=16, epochs=1,
    ...                                   quiet=True)
    >>> trainer.shard, trainer.is_main
    (SeedShard(rank=0, world_size=1, drop_last=False), True)
    >>> record = trainer.fit().history[0]
    >>> record["world_size"], record["steps"] == record["ranks"][0]["steps"] == len(trainer.loader)
    (1, True)
    >>> dist.destroy_process_group(); tmp.cleanup()
    """


class DistributedTypedLinkTrainer(TypedRanks, TypedLinkTrainer):
    """A :class:`~graphpipe.train.typed_link.TypedLinkTrainer` that is one rank of a
    data-parallel run: every rank draws the same random link split (the ``seed``) and
    the same permutation of its training edges per epoch, and trains on its
    :class:`~graphpipe.loaders.shard.SeedShard` of them (disjoint but for the padding;
    each positive with its binary negatives), gradients averaged by
    ``DistributedDataParallel``; sums all-reduced, rank 0 evaluates (the metric is
    broadcast), logs and checkpoints (module docstring). ``batch_size`` is positive edges
    per rank. A checkpoint resumes with any number of ranks, or in one process with a
    :class:`TypedLinkTrainer`, and vice versa.

    Args:
        model, data: as :class:`TypedLinkTrainer` (build the model the same way on every rank).
        process_group, drop_last: as :class:`DistributedTypedTrainer`.
        **kwargs: the :class:`TypedLinkTrainer` arguments.

    One rank (a one-process gloo group), so it runs inside this example:

    >>> import tempfile
    >>> import torch, torch.distributed as dist
    >>> from graphpipe.ingest import ingest
    >>> from graphpipe.synthetic.mag import mag_dataset, write_ogb_mag
    >>> from graphpipe.train.trainer import typed_model_dims, typed_training_data
    >>> from graphpipe.train.typed_link import TypedLinkPredictor
    >>> tmp = tempfile.TemporaryDirectory()
    >>> data = mag_dataset(papers=60, authors=70, institutions=5, fields=8, num_classes=3,
    ...                    feature_dim=4, seed=0)
    >>> store = ingest(write_ogb_mag(tmp.name + "/src", data), tmp.name + "/s")
    >>> graph = typed_training_data(store)
    >>> dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    >>> _ = torch.manual_seed(0)
    >>> model = TypedLinkPredictor("rgcn", typed_model_dims(graph), graph.num_nodes_dict,
    ...                            graph.edge_types, ("author", "writes", "paper"), hidden=8)
    >>> trainer = DistributedTypedLinkTrainer(model, store, fanouts=[3, 3], batch_size=64,
    ...                                       epochs=1, quiet=True)
    >>> record = trainer.fit().history[0]
    >>> record["world_size"], record["metric"], record["steps"] == len(trainer.loader)
    (1, 'mrr', True)
    >>> dist.destroy_process_group(); tmp.cleanup()
    """

    def eval_keys(self) -> tuple[str, ...]:
        """``valid``, ``test`` and MRR's other figures
        (:func:`~graphpipe.train.link.link_eval_keys`)."""
        return link_eval_keys(self.metric)
