"""`graphpipe split STORE --random 0.8,0.1,0.1 [--seed 0]`: give a store a random node split."""

from __future__ import annotations

import click
from graphpipe.cli._common import friendly_errors


@click.command("split")
@click.argument("store", type=click.Path(path_type=str))
@click.option("--random", "fractions", required=True, metavar="TRAIN,VALID,TEST",
              help="Fractions of a seeded random node split, e.g. 0.8,0.1,0.1 (of the labelled "
                   "nodes; PyG's RandomNodeSplit sizes).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--node-type", default=None,
              help="Typed stores: the node type to split [default: the target type].")
@click.option("--replace", is_flag=True, help="Replace the store's existing splits.")
@friendly_errors
def command(store: str, fractions: str, seed: int, node_type: str | None, replace: bool) -> None:
    """Store a seeded random train/valid/test split of STORE's nodes (atomically, beside
    what is there), like any split: `graphpipe train` then uses it."""
    from graphpipe.ingest.random_split import write_random_split

    sizes = write_random_split(store, fractions, seed, node_type=node_type, replace=replace)
    counts = ", ".join(f"{name} {count:,}" for name, count in sizes.items())
    click.echo(f"split {store}" + (f" ({node_type})" if node_type else "") + f": {counts} (seed {seed})")
