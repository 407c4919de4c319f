"""`graphpipe export STORE DEST --format graphbolt`: a store in another library's format."""

from __future__ import annotations

import click
from graphpipe.cli._common import friendly_errors


@click.command("export")
@click.argument("store", type=click.Path(path_type=str))
@click.argument("dest", type=click.Path(path_type=str))
@click.option("--format", "fmt", type=click.Choice(["graphbolt"]), default="graphbolt",
              show_default=True, help="graphbolt: DGL GraphBolt's on-disk dataset (metadata.yaml).")
@friendly_errors
def command(store: str, dest: str, fmt: str) -> None:
    """Write the store STORE as a new dataset folder DEST."""
    from graphpipe.export import write_graphbolt
    from graphpipe.store import open_store

    opened = open_store(store)
    out = write_graphbolt(opened, dest)
    click.echo(f"exported {opened.name} ({opened.num_nodes:,} nodes, {opened.num_edges:,} edges) "
               f"as {fmt} → {out}")
