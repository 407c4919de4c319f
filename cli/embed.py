"""`graphpipe embed STORE --lm PATH`: LM embeddings of every node's text as the derived
feature array ``derived/<name>``, in chunks, resumable (:mod:`graphpipe.train.text.embed`)."""

from __future__ import annotations

import click
from graphpipe.cli._common import friendly_errors


@click.command(name="embed")
@click.argument("store", type=click.Path(exists=True, file_okay=False))
@click.option("--lm", "lm_path", required=True, type=click.Path(file_okay=False),
              help="A local LM folder (config.json + model.safetensors); nothing is downloaded.")
@click.option("--name", default="lm_emb", show_default=True,
              help="The array is derived/NAME.")
@click.option("--depth", type=click.IntRange(1), default=None,
              help="Encoder layers to run (default: all).")
@click.option("--max-len", type=click.IntRange(4), default=128, show_default=True)
@click.option("--chunk-rows", type=click.IntRange(1), default=8192, show_default=True,
              help="Nodes per saved chunk (what a restart does not redo).")
@click.option("--batch-size", type=click.IntRange(1), default=64, show_default=True)
@click.option("--quiet", "-q", is_flag=True)
@friendly_errors
def command(store: str, lm_path: str, name: str, depth: int | None, max_len: int,
            chunk_rows: int, batch_size: int, quiet: bool) -> None:
    """Encode the text of every node of STORE with the LM at --lm (mean-pooled tokens)
    and store the embeddings as derived/NAME (float32, N x hidden)."""
    from graphpipe.store import GraphStore
    from graphpipe.train.text.embed import embed_store

    opened = GraphStore.open(store)

    def progress(done: int, total: int) -> None:
        if not quiet:
            click.echo(f"  {done:,}/{total:,} nodes", err=True)

    entry = embed_store(opened, lm_path, name=name, depth=depth, max_len=max_len,
                        chunk_rows=chunk_rows, batch_size=batch_size, progress=progress)
    click.echo(f"{store}: {entry['key']} ({opened.num_nodes:,} x {entry['dim']}), "
               f"{entry['encoded_this_run']:,} nodes encoded in {entry['seconds_this_run']:.2f} s")
