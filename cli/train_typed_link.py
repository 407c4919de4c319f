"""`graphpipe train TYPED_STORE --task link --relation SRC___REL___DST`: link prediction on
one relation of a typed store (:class:`graphpipe.train.typed_link.TypedLinkTrainer`): a
random link split of the relation (PyG's ``RandomLinkSplit``: 10% valid, 20% test, the
held-out edges and their reverses out of message passing), R-GCN (default), hetero
SAGE or R-GAT embeddings with a dot or MLP decoder, one line per epoch and last
``test hits@50 <value>`` (OGB's Evaluator) at the best valid epoch. Checkpoints,
``--resume``, ``--patience`` and ``--metrics-log`` work as for node classification."""

from __future__ import annotations

from typing import Any

import click
from graphpipe.cli import train_options as opts
from graphpipe.cli._common import fail

ENCODERS = ("rgcn", "hetero-sage", "rgat")


def _relation(params: dict[str, Any], store: Any) -> tuple[str, str, str]:
    from graphpipe.ops.sampling.types import etype_str

    names = ", ".join(etype_str(e) for e in store.edge_types)
    if params["relation"] is None:
        fail(f"--task link on a typed store needs --relation SRC___REL___DST (relations: {names})")
    parts = tuple(params["relation"].split("___"))
    if parts not in {tuple(e) for e in store.edge_types}:
        fail(f"--relation must be one of {names} (got {params['relation']!r})")
    return parts


def run(params: dict[str, Any]) -> None:
    """Run typed ``--task link`` with the ``graphpipe train`` parameters ``params``."""
    import torch

    from graphpipe.store import open_store
    from graphpipe.train.trainer import typed_model_dims, typed_training_data
    from graphpipe.train.typed_link import TypedLinkPredictor, TypedLinkTrainer

    name, path = params["model_name"] or "rgcn", params["store"]
    if name not in ENCODERS:
        fail(f"--task link on a typed store needs --model {' / '.join(ENCODERS)} (got {name!r})")
    if params["heads"] is not None and name != "rgat":
        fail(f"--heads: not used by typed link prediction with --model {name} (R-GAT's)")
    store = open_store(path)
    relation = _relation(params, typed_training_data(store, reverse=False))
    o = opts.pick(params, {**opts.LINK_DEFAULTS, "heads": opts.TYPED_DEFAULTS["heads"]})
    o["layers"], fanouts = opts.layers_and_fanouts(params, opts.LINK_DEFAULTS["layers"],
                                                   default_fanouts=lambda n: [10] * n)
    if name == "rgat" and o["hidden"] % o["heads"]:
        fail(f"--hidden must be a multiple of --heads={o['heads']} for --model rgat "
             f"(got {o['hidden']})")
    graph = typed_training_data(store)
    torch.manual_seed(params["seed"])
    model = TypedLinkPredictor(name, typed_model_dims(graph), graph.num_nodes_dict, graph.edge_types,
                               relation, o["hidden"], o["layers"], decoder=o["decoder"],
                               dropout=o["dropout"], **({"heads": o["heads"]} if name == "rgat" else {}))
    trainer = TypedLinkTrainer(model, store, fanouts=fanouts, **opts.loop_options(params, o))
    if params["resume"] is not None:
        trainer.check_resume(params["resume"])
    if not params["quiet"]:
        sizes = " / ".join(str(trainer.split.edges[s].num_pos) for s in ("train", "valid", "test"))
        click.echo(f"{path}: link prediction on {params['relation']} (random split train / valid / "
                   f"test {sizes} edges), encoder {name}, decoder {o['decoder']}, fanouts {fanouts}, "
                   f"batch {o['batch_size']} positive edges, {len(trainer.loader)} batches/epoch")
    result = trainer.fit(resume=params["resume"])
    opts.report(result, quiet=params["quiet"], checkpoint=params["checkpoint"], metric=trainer.metric)
