"""`graphpipe partition STORE --parts K`: METIS partition and cluster order, stored as
derived arrays of the store (``partition/k{K}/part``, ``/perm``, ``/inverse``)."""

from __future__ import annotations

import click
from graphpipe.cli._common import friendly_errors


@click.command(name="partition")
@click.argument("store", type=click.Path(exists=True, file_okay=False))
@click.option("--parts", "num_parts", type=click.IntRange(1), required=True,
              help="Number of METIS parts K.")
@click.option("--recursive/--kway", default=False, show_default=True,
              help="METIS recursive bisection instead of k-way.")
@click.option("--seed", type=int, default=0, show_default=True, help="METIS random seed.")
@click.option("--overwrite", is_flag=True,
              help="Replace an existing K-way partition (only that K's arrays).")
@friendly_errors
def command(store: str, num_parts: int, recursive: bool, seed: int, overwrite: bool) -> None:
    """Partition the graph of STORE into K parts with METIS and store each node's part,
    the cluster order (perm) and its inverse; other K's partitions are kept."""
    from graphpipe.derive import write_partition
    from graphpipe.store import open_store

    opened = open_store(store)
    entry = write_partition(opened, num_parts, recursive=recursive, seed=seed,
                            overwrite=overwrite)
    sizes = entry["part_sizes"]
    click.echo(f"{store}: {opened.num_nodes} nodes in {num_parts} parts "
               f"({'recursive' if recursive else 'k-way'}, seed {seed}); edge cut "
               f"{entry['edge_cut']}; part sizes {min(sizes)}..{max(sizes)}; arrays "
               f"partition/k{num_parts}/{{part,perm,inverse}}")
