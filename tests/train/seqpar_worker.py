"""One rank of tests/train/test_sequence_parallel.py, started with torchrun's environment
(MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE): ``python seqpar_worker.py MODE OUT [STORE]``.

MODE ``steps``: for every (model, attention) case, one forward + backward at P ranks and
(on rank 0) the one-process reference on the same sequence; rank 0 saves both losses and
gradients to OUT (``torch.save`` of tensors). Also checks the all-to-alls (round trip,
against an all-gathered reference, adjoint backward, P not dividing H).
MODE ``trainer``: :class:`SequenceParallelTrainer` for a few steps on STORE, rank 0 saves
the weights and the history.
"""

from __future__ import annotations

import sys

import numpy as np
import torch
import torch.distributed as dist
from torch.nn import functional as F

from graphpipe.loaders import ClusterLoader
from graphpipe.synthetic import community_graph
from graphpipe.train import build_model
from graphpipe.train.distributed import exit_spawned_rank
from graphpipe.train.sequence_parallel import (
    HeadExchange,
    all_reduce_gradients,
    init_from_env,
    parallel_forward,
    parallel_loss,
)

CASES = [("graphormer", "sparse"), ("graphormer", "cluster-sparse"), ("graphormer", "dense"),
         ("gt", "sparse"), ("gt", "cluster-sparse")]
DIM, CLASSES, HIDDEN, LAYERS, HEADS = 8, 4, 16, 2, 4
TRAINER = {"seq_len": 63, "parts": 4, "block": 4, "epochs": 1, "max_steps": 3, "lr": 0.01,
           "quiet": True}


def arrays() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    g = community_graph(300, CLASSES, avg_degree=6, feature_dim=DIM, seed=1)
    order = np.lexsort((g.src, g.dst))
    indptr = np.zeros(g.num_nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(g.dst, minlength=g.num_nodes), out=indptr[1:])
    labels = g.labels.copy()
    labels[::5] = -1                              # some unlabelled positions
    return indptr, g.src[order], g.features, labels


def make_model(name: str) -> torch.nn.Module:
    torch.manual_seed(0)
    extra = {"input_dropout": 0.0} if name == "graphormer" else {}
    return build_model(name, DIM, HIDDEN, CLASSES, LAYERS, heads=HEADS, dropout=0.0,
                       **extra).double()


def make_batch(name: str, attention: str, pad: int):
    loader = ClusterLoader(arrays(), seq_len=63, input_nodes=None, parts=4, block=4,
                           pattern="cluster-sparse" if attention == "cluster-sparse" else "sparse",
                           global_token=name == "graphormer", pad_multiple=pad, threshold=5.0)
    return next(iter(loader))


def grads(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {n: (p.grad if p.grad is not None else torch.zeros_like(p)).detach().clone()
            for n, p in model.named_parameters()}


def one_case(name: str, attention: str, ex: HeadExchange) -> dict:
    batch = make_batch(name, attention, ex.world)
    if attention == "cluster-sparse":
        assert batch.cluster_sparse.num_blocks > 0, "no transferred cluster: blocks untested"
    model = make_model(name)
    ex.reset_stats()
    logits = parallel_forward(model, batch, ex, attention)
    n = batch.seq_len // ex.world
    loss, labelled, _ = parallel_loss(logits, batch.y[:, ex.rank * n:(ex.rank + 1) * n], ex)
    loss.backward()
    all_reduce_gradients(model, ex)
    total = ex.all_reduce(loss.detach().reshape(1).clone())
    result = {"loss": total, "grads": grads(model), "labelled": labelled,
              "seq_len": batch.seq_len,
              "fwd": torch.tensor([ex.forward_stats.calls, ex.forward_stats.elements]),
              "bwd": torch.tensor([ex.backward_stats.calls, ex.backward_stats.elements])}
    if ex.rank == 0:                              # the one-process reference, same sequence
        ref = make_model(name)
        out = ref(batch, attention=attention)
        ref_loss = F.cross_entropy(out.reshape(-1, CLASSES), batch.y.reshape(-1),
                                   ignore_index=-100)
        ref_loss.backward()
        result.update(ref_loss=ref_loss.detach().reshape(1), ref_grads=grads(ref))
    return result


def check_exchange(ex: HeadExchange) -> None:
    p, r = ex.world, ex.rank
    gen = torch.Generator().manual_seed(10 + r)
    x = torch.randn(3, 2, 4, 5, dtype=torch.float64, generator=gen, requires_grad=True)
    y = ex.seq_to_heads(x)                                       # (3P, 2, 4/P, 5)
    parts = [torch.empty_like(x) for _ in range(p)]
    dist.all_gather(parts, x.detach())
    expect = torch.cat(parts)[:, :, ex.head_slice(4)]
    assert torch.equal(y, expect), "seq_to_heads differs from the all-gathered sequence"
    assert torch.equal(ex.heads_to_seq(y), x), "heads_to_seq(seq_to_heads(x)) != x"
    g = torch.randn(y.shape, dtype=torch.float64, generator=gen)
    (y * g).sum().backward()
    assert torch.equal(x.grad, ex.heads_to_seq(g[:, :, :, :])), "backward is not the reverse"
    lhs = ex.all_reduce((y.detach() * g).sum().reshape(1))          # <A x, g>
    rhs = ex.all_reduce((x.detach() * x.grad).sum().reshape(1))     # <x, A^T g>
    assert torch.allclose(lhs, rhs, rtol=1e-12, atol=1e-12), (lhs, rhs)
    try:
        ex.head_slice(p + 1)
    except ValueError as exc:
        assert "not a multiple" in str(exc)
    else:
        raise AssertionError("P not dividing H did not raise")


def run_trainer(store: str, ex: HeadExchange) -> dict:
    from graphpipe.train.sequence_parallel_trainer import SequenceParallelTrainer

    trainer = SequenceParallelTrainer(make_model("graphormer"), store, exchange=ex, **TRAINER)
    result = trainer.fit()
    state = {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}
    rec = result.history[-1]
    return {"state": state, "loss": torch.tensor([rec["loss"]], dtype=torch.float64),
            "acc": torch.tensor([rec["valid_acc"], rec["test_acc"]], dtype=torch.float64),
            "comm": torch.tensor([rec["comm"]["forward_bytes"], rec["comm"]["backward_bytes"]])}


def main() -> None:
    mode, out = sys.argv[1], sys.argv[2]
    torch.set_num_threads(1)
    init_from_env()
    ex = HeadExchange()
    if mode == "steps":
        check_exchange(ex)
        results = {f"{m}/{a}": one_case(m, a, ex) for m, a in CASES}
    else:
        results = run_trainer(sys.argv[3], ex)
    if ex.rank == 0:
        torch.save(results, out)
    dist.barrier()
    dist.destroy_process_group()
    exit_spawned_rank(0)  # as graphpipe's ranks end: no finalization tearing down gloo (SIGABRT)


if __name__ == "__main__":
    main()
