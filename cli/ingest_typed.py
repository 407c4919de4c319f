"""`graphpipe ingest` of a typed (heterogeneous) dataset: a typed store, then a one-line summary."""

from __future__ import annotations

import time
from typing import Any

import click
from graphpipe.cli._common import human_bytes


def ingest_typed_command(source: str, dest: str, options: Any, *, split_name: str | None,
                         target_type: str | None, quiet: bool, extra: dict[str, Any]) -> None:
    """Ingest ``source`` with :func:`graphpipe.ingest.typed.ingest_typed` and print the summary."""
    from graphpipe.ingest.typed import ingest_typed
    from graphpipe.progress import Progress
    from graphpipe.store.summary import _dir_size

    given = [flag for flag, value in extra.items() if value]
    if given:
        raise click.UsageError(f"{', '.join(given)} do not apply to a typed (heterogeneous) dataset")
    started = time.perf_counter()
    with Progress(None if not quiet else False) as bars:
        store = ingest_typed(source, dest, options, progress=bars.callback(),
                             reader_options={"split": split_name, "target_type": target_type})
    seconds = time.perf_counter() - started
    click.echo(f"ingested {store.name}: {store.num_nodes:,} nodes of {len(store.node_types)} types, "
               f"{store.num_edges:,} edges of {len(store.edge_types)} relations, target type "
               f"{store.target_type}, {human_bytes(_dir_size(store.path))} in {seconds:.2f} s → {dest}")
