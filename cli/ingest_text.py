"""The text options of `graphpipe ingest` (``--text``, ``--text-column``, ``--tokenizer``,
...): node text stored beside the graph (:mod:`graphpipe.ingest.text`)."""

from __future__ import annotations

from typing import Any

import click

TEXT_OPTIONS = ("text", "text_column", "tokenizer", "tokenizer_kind", "vocab_size", "max_tokens",
                "max_text_bytes")


def text_options(fn):
    """Add the text options to a click command (they arrive as keyword arguments)."""
    options = [
        click.option("--text", "text", default=None, type=click.Path(dir_okay=False),
                     help="OGB folder: a titleabs.tsv (paper id<TAB>title<TAB>abstract, no "
                          "header) joined on mapping/nodeidx2paperid.csv.gz, as TAPE/GLEM read "
                          "ogbn-arxiv's text."),
        click.option("--text-column", default=None,
                     help="Node table (--nodes): the column holding each node's text."),
        click.option("--tokenizer", default=None, type=click.Path(dir_okay=False),
                     help="A tokenizer.json to tokenize the text with (default: a vocabulary "
                          "trained on the store's own text)."),
        click.option("--tokenizer-kind", type=click.Choice(["wordpiece", "bpe"]),
                     default="wordpiece", show_default=True,
                     help="Kind of the vocabulary trained when no --tokenizer is given."),
        click.option("--vocab-size", type=click.IntRange(16), default=8000, show_default=True),
        click.option("--max-tokens", type=click.IntRange(1), default=256, show_default=True,
                     help="Tokens kept per node and text field."),
        click.option("--max-text-bytes", type=click.IntRange(1), default=1 << 20,
                     show_default=True, help="Longer texts are cut to this many UTF-8 bytes."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def text_inputs(params: dict[str, Any]) -> list[str]:
    """Files the text options read (an overwrite must never replace one)."""
    return [p for p in (params.get("text"), params.get("tokenizer")) if p]


def refuse_text(params: dict[str, Any], what: str) -> None:
    """A usage error when a text option is given for ``what`` (a source without node text
    support)."""
    given = [f"--{k.replace('_', '-')}" for k in ("text", "text_column", "tokenizer")
             if params.get(k) is not None]
    if given:
        raise click.UsageError(f"{', '.join(given)}: node text is not supported for {what}")


def attach(dataset: Any, source: str, params: dict[str, Any]) -> None:
    """Have the ingest of ``dataset`` (read from ``source``) also store the text the
    options ask for; nothing when none is asked."""
    if params.get("text") is None and params.get("text_column") is None:
        if params.get("tokenizer") is not None:
            raise click.UsageError("--tokenizer needs --text or --text-column")
        return
    if params.get("text") is not None and params.get("text_column") is not None:
        raise click.UsageError("--text and --text-column are alternatives; give one")
    from graphpipe.ingest.ogb import is_ogb_folder
    from graphpipe.ingest.text import (
        attach_text,
        column_source,
        read_paper_ids,
        titleabs_source,
    )
    from graphpipe.ingest.text_store import TokenizerOptions
    from graphpipe.text.rules import TextRules

    tokenizer = TokenizerOptions(path=params.get("tokenizer"), kind=params["tokenizer_kind"],
                                 vocab_size=params["vocab_size"], max_tokens=params["max_tokens"])
    rules = TextRules(max_bytes=params["max_text_bytes"])
    if params.get("text") is not None:
        if not is_ogb_folder(source):
            raise click.UsageError("--text reads a titleabs.tsv beside an OGB folder; for a node "
                                   "table use --text-column")
        paper_ids = read_paper_ids(source, dataset.num_nodes)
        tsv = params["text"]
        attach_text(dataset, lambda scratch: titleabs_source(tsv, paper_ids, scratch),
                    tokenizer, rules)
        return
    table, column = dataset.node_table, params["text_column"]
    if table is None:
        raise click.UsageError("--text-column needs a node table (--nodes)")
    text = column_source(table, column, dataset.extra.get("node_table", "node table"))
    if column in table.column_names:
        dataset.node_table = table.drop_columns([column])  # stored once, as text
    attach_text(dataset, lambda scratch: text, tokenizer, rules)
