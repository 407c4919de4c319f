"""`graphpipe derive STORE --mean-features TYPE --via SRC___REL___DST`: a featureless type's
features as the mean of its neighbours' over one relation (the OGB-LSC MAG240M baseline's
author and institution features), computed out of core in bounded memory, resumably, and
stored as the type's features."""

from __future__ import annotations

import click
from graphpipe.cli._common import friendly_errors


@click.command(name="derive")
@click.argument("store", type=click.Path(exists=True, file_okay=False))
@click.option("--mean-features", "ntype", required=True, metavar="TYPE",
              help="The node type to give features (e.g. author).")
@click.option("--via", required=True, metavar="SRC___REL___DST",
              help="The relation joining TYPE to a type with features (either end may be "
                   "TYPE), e.g. author___writes___paper.")
@click.option("--memory", "memory_mb", type=click.IntRange(16), default=None,
              help="Working memory of the computation in MiB [default: half of what this "
                   "process may use, cgroup limits included]. The other type's features are "
                   "read once per block of TYPE's sums that fits: more memory, fewer passes.")
@click.option("--accumulate", type=click.Choice(["float64", "float32"]), default="float64",
              show_default=True,
              help="Dtype of the sums: float32 halves the passes (within float32 rounding).")
@click.option("--overwrite", is_flag=True, help="Replace features TYPE already has.")
@friendly_errors
def command(store: str, ntype: str, via: str, memory_mb: int | None, accumulate: str,
            overwrite: bool) -> None:
    """Store TYPE's features in STORE as the mean of its neighbours' features over the
    relation --via (float16 stays float16; a node without neighbours gets zeros). Chains
    work by running it again: institutions from the authors' derived features. A run
    that stops part-way resumes after its last finished block when started again."""
    from graphpipe.derive import write_mean_features
    from graphpipe.memory import usable_memory
    from graphpipe.store import open_store

    memory = (memory_mb << 20) if memory_mb else max(16 << 20, usable_memory() // 2)
    entry = write_mean_features(open_store(store), ntype, via, memory_bytes=memory,
                                accumulate=accumulate, replace=overwrite)
    feat = open_store(store).typed_features(ntype)
    resumed = f", resumed at row {entry['resumed_at_row']}" if entry["resumed_at_row"] else ""
    click.echo(f"{store}: {ntype} features {feat.shape[0]} x {feat.shape[1]} {entry['dtype']}, "
               f"the mean of their {entry['source_type']} neighbours over {entry['via']} "
               f"({entry['without_neighbours']} without neighbours: zeros); "
               f"{entry['passes']} passes over the {entry['source_type']} features "
               f"({entry['source_bytes_gathered'] / 1e6:.1f} MB of their rows used, read in "
               f"sequential blocks; {memory >> 20} MiB working memory{resumed})")
