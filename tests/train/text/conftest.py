"""A small text-attributed store (300 nodes, title + abstract) for the text trainers."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from graphpipe.cli.main import cli

from graphpipe.synthetic.tag import tag_graph, write_tag

TINY_LM = ["--lm-hidden", "32", "--lm-layers", "4", "--lm-heads", "2", "--max-len", "24",
           "--emb-dim", "16", "--hidden", "32", "--lm-batch-size", "16"]


@pytest.fixture(scope="session")
def tag_store(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("tagstore")
    graph, titles, abstracts = tag_graph(300, 4, text_noise=0.3, seed=2)
    write_tag(root / "raw", graph, titles, abstracts, seed=2)
    result = CliRunner().invoke(cli, ["ingest", str(root / "raw"), str(root / "s"), "--text",
                                      str(root / "raw" / "titleabs.tsv"), "-q"])
    assert result.exit_code == 0, result.output
    return root / "s"
