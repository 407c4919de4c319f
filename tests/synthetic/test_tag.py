"""The text-attributed graph generator: deterministic, the arxiv-with-text layout, text
that carries the class for about 1 - text_noise of the nodes."""

from __future__ import annotations

import numpy as np
from click.testing import CliRunner
from graphpipe.cli.main import cli

from graphpipe.synthetic.tag import tag_graph


def test_deterministic_and_text_carries_the_class() -> None:
    g1, t1, a1 = tag_graph(400, 4, text_noise=0.3, seed=5)
    g2, t2, a2 = tag_graph(400, 4, text_noise=0.3, seed=5)
    assert t1 == t2 and a1 == a2 and np.array_equal(g1.labels, g2.labels)
    # a node's most frequent topic words point to its class for about 70% + 30%/4 of nodes
    words_of = {}
    for text, y in zip(a1, g1.labels):
        for w in text.split():
            words_of.setdefault(w, []).append(int(y))
    owner = {w: np.bincount(ys, minlength=4).argmax() for w, ys in words_of.items()}
    votes = [np.bincount([owner[w] for w in text.split()], minlength=4) for text in a1]
    guess = np.array([v.argmax() for v in votes])
    assert 0.65 < float((guess == g1.labels).mean()) < 0.95


def test_generate_tag_layout(tmp_path) -> None:
    result = CliRunner().invoke(cli, ["generate", "tag", str(tmp_path / "t"), "--nodes", "100",
                                      "--num-classes", "3", "-q"])
    assert result.exit_code == 0, result.output
    for rel in ("raw/edge.csv.gz", "mapping/nodeidx2paperid.csv.gz", "titleabs.tsv",
                "split/random/train.csv.gz"):
        assert (tmp_path / "t" / rel).is_file()
    lines = (tmp_path / "t" / "titleabs.tsv").read_text().splitlines()
    assert len(lines) == 100 - round(0.01 * 100) + 5 or len(lines) > 95
    assert all(len(line.split("\t")) == 3 for line in lines)
