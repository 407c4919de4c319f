"""A text-attributed graph (TAG) whose class lives partly in the text and partly in the
neighbourhood, written in the ogbn-arxiv-with-text layout (``graphpipe generate tag``).

- **Topology, labels, raw features**: :func:`graphpipe.synthetic.community.community_graph`
  (degree-corrected SBM, ``homophily``), features made weak (``feature_noise``), so a
  GNN on the raw features is well below what text + graph give.
- **Text**: a title (``title_words``) and an abstract (``abstract_words``) of
  pseudo-words. Each class has ``topic_words`` words of its own; every word of a node is
  a topic word with probability ``topic_rate``, else a common word. A node's topic
  words come from its own class, except with probability ``text_noise`` from a class
  drawn at random (its text then says little about it): an LM alone reaches about
  ``1 - text_noise`` (+ chance); the node's neighbours, mostly of its class and mostly
  with true text, give the rest.
- **Layout**: :func:`write_tag` writes the OGB raw folder (``raw/``, ``split/random/``),
  ``mapping/nodeidx2paperid.csv.gz`` (header ``node idx,paper id``; random distinct
  paper IDs) and ``titleabs.tsv`` (``paper id<TAB>title<TAB>abstract``, no header,
  shuffled, with ``unmatched_frac`` extra lines of papers no node maps to and
  ``missing_frac`` nodes without a line), as ogbn-arxiv's raw text is laid out.

>>> g, title, abstract = tag_graph(200, 4, seed=1)
>>> len(title), g.num_classes, title[0].count(" ") + 1 >= 4
(200, 4, True)
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import numpy as np

from graphpipe.synthetic.community import community_graph
from graphpipe.synthetic.graph import SyntheticGraph

__all__ = ["tag_graph", "write_tag"]

_CONSONANTS = "bcdfghklmnprstvz"
_VOWELS = "aeiou"


def _words(count: int, rng: np.random.Generator, taken: set[str]) -> list[str]:
    """``count`` distinct pseudo-words of 3 syllables, none in ``taken``."""
    out: list[str] = []
    while len(out) < count:
        syl = rng.integers(0, [len(_CONSONANTS), len(_VOWELS)] * 3, size=6)
        word = "".join(_CONSONANTS[syl[i]] + _VOWELS[syl[i + 1]] for i in range(0, 6, 2))
        if word not in taken:
            taken.add(word)
            out.append(word)
    return out


def tag_graph(num_nodes: int = 4000, num_classes: int = 8, *, avg_degree: float = 10,
              feature_dim: int = 32, homophily: float = 0.8, feature_noise: float = 2.5,
              text_noise: float = 0.4, topic_rate: float = 0.35, topic_words: int = 40,
              common_words: int = 400, title_words: int = 8, abstract_words: int = 30,
              seed: int = 0) -> tuple[SyntheticGraph, list[str], list[str]]:
    """``(graph, titles, abstracts)`` (module docstring); deterministic for a seed."""
    if not 0.0 <= text_noise <= 1.0 or not 0.0 <= topic_rate <= 1.0:
        raise ValueError(f"'text_noise' and 'topic_rate' must be in [0, 1] (got {text_noise}, "
                         f"{topic_rate})")
    if min(topic_words, common_words, title_words, abstract_words) < 1:
        raise ValueError("word counts must be positive")
    graph = community_graph(num_nodes, num_classes, avg_degree=avg_degree,
                            feature_dim=feature_dim, homophily=homophily,
                            feature_noise=feature_noise, seed=seed)
    rng = np.random.default_rng([int(seed), 0x746167])
    taken: set[str] = set()
    topics = np.array([_words(topic_words, rng, taken) for _ in range(num_classes)])
    common = np.array(_words(common_words, rng, taken))
    labels = graph.labels
    noisy = rng.random(num_nodes) < text_noise
    text_class = np.where(noisy, rng.integers(0, num_classes, num_nodes), labels)

    def texts(length: int) -> list[str]:
        topic = rng.random((num_nodes, length)) < topic_rate
        words = np.where(topic, topics[text_class[:, None], rng.integers(0, topic_words,
                                                                          (num_nodes, length))],
                         common[rng.integers(0, common_words, (num_nodes, length))])
        return [" ".join(row) for row in words.tolist()]

    titles, abstracts = texts(title_words), texts(abstract_words)
    graph.params.update(generator="tag", text_noise=text_noise, topic_rate=topic_rate,
                        topic_words=topic_words, common_words=common_words,
                        title_words=title_words, abstract_words=abstract_words)
    return graph, titles, abstracts


def write_tag(folder: str | os.PathLike, graph: SyntheticGraph, titles: list[str],
              abstracts: list[str], *, unmatched_frac: float = 0.05, missing_frac: float = 0.01,
              seed: int = 0) -> Path:
    """Write the ogbn-arxiv-with-text layout under ``folder`` (module docstring)."""
    from graphpipe.synthetic.writers import write_ogb_raw

    folder = Path(folder)
    write_ogb_raw(folder, graph)
    n = graph.num_nodes
    rng = np.random.default_rng([int(seed), 0x7473])
    extra = round(unmatched_frac * n)
    ids = rng.choice(np.int64(50) * (n + extra) + 1000, size=n + extra, replace=False) + 100000
    paper, stray = ids[:n], ids[n:]
    (folder / "mapping").mkdir(exist_ok=True)
    with gzip.open(folder / "mapping" / "nodeidx2paperid.csv.gz", "wt", encoding="utf-8") as fh:
        fh.write("node idx,paper id\n")
        fh.writelines(f"{i},{p}\n" for i, p in enumerate(paper.tolist()))
    keep = rng.random(n) >= missing_frac
    lines = [f"{paper[i]}\t{titles[i]}\t{abstracts[i]}\n" for i in np.flatnonzero(keep)]
    lines += [f"{p}\tstray paper {j}\tabout nothing in this graph\n"
              for j, p in enumerate(stray.tolist())]
    order = rng.permutation(len(lines))
    with open(folder / "titleabs.tsv", "w", encoding="utf-8") as fh:
        fh.writelines(lines[i] for i in order)
    return folder
