"""`graphpipe centrality STORE`: degree-centrality groups and the hotness order, stored as
derived arrays of the store."""

from __future__ import annotations

import click
from graphpipe.cli._common import friendly_errors


@click.command(name="centrality")
@click.argument("store", type=click.Path(exists=True, file_okay=False))
@click.option("--method", type=click.Choice(["quartile", "log-bins", "equal-width"]),
              default="quartile", show_default=True,
              help="quartile: equal-frequency groups; log-bins: equal-width bins of log(1+degree); "
                   "equal-width: equal-width bins of the degree.")
@click.option("--bins", type=click.IntRange(1, 127), default=4, show_default=True,
              help="Number of groups (group 0 = least central).")
@friendly_errors
def command(store: str, method: str, bins: int) -> None:
    """Group the nodes of STORE by in-degree and store `derived/degree_group` (int8) and
    `derived/degree_order` (node IDs, hottest first)."""
    from graphpipe.derive import write_centrality
    from graphpipe.store import open_store

    opened = open_store(store)
    entry = write_centrality(opened, method, bins)
    sizes = ", ".join(f"{g}: {s}" for g, s in enumerate(entry["group_sizes"]))
    click.echo(f"{store}: {opened.num_nodes} nodes in {bins} groups ({method}); sizes {sizes}")
