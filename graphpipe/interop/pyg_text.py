"""A PyG ``Data`` whose nodes carry text (a list of strings, one per node, as
``data.text`` / ``data.raw_texts`` in TAPE-style datasets) written as a store with node
text: :func:`write_pyg_text_store`. Everything :func:`graphpipe.interop.pyg_data.from_pyg`
keeps is kept; the list becomes the text field ``attr`` (raw strings and token IDs,
:mod:`graphpipe.store.text`), written before the store is committed.

>>> import tempfile, torch
>>> from torch_geometric.data import Data
>>> data = Data(x=torch.eye(3), y=torch.tensor([0, 1, 1]),
...             edge_index=torch.tensor([[0, 1, 2], [1, 2, 0]]))
>>> data.text = ["graph learning", "", "language models"]
>>> tmp = tempfile.TemporaryDirectory()
>>> store = write_pyg_text_store(data, tmp.name + "/tri", vocab_size=40)
>>> store.manifest["text"]["nodes_with_text"], store.manifest["text"]["fields"]
(2, ['text'])
>>> from graphpipe.store.text import read_texts
>>> read_texts(store, "text")
['graph learning', None, 'language models']
>>> tmp.cleanup()
"""

from __future__ import annotations

import os
from typing import Any

from graphpipe.interop.array_store import write_parts_store
from graphpipe.loaders.pyg_arrays import pyg_parts

__all__ = ["write_pyg_text_store"]


def write_pyg_text_store(data: Any, path: str | os.PathLike, *, attr: str = "text",
                         overwrite: bool = False, name: str | None = None,
                         tokenizer: str | None = None, vocab_size: int = 8000,
                         max_tokens: int = 256) -> Any:
    """Write ``data`` with its node text ``data[attr]`` (a list of ``N`` strings or
    ``None``) as a new store at ``path``; returns the opened ``GraphStore``. The list is
    checked (length, element types) before anything is written."""
    from graphpipe.ingest.text import attach_text, list_source
    from graphpipe.ingest.text_store import TokenizerOptions

    texts = getattr(data, attr, None)
    if not isinstance(texts, (list, tuple)):
        raise ValueError(  # noqa: TRY004 - the project reports bad arguments as ValueError
                         f"Data.{attr} must be a list of strings, one per node (got "
                         f"{type(texts).__name__})")
    parts = pyg_parts(data)
    num_nodes = int(parts[0]["num_nodes"])
    if len(texts) != num_nodes:
        raise ValueError(f"Data.{attr} has {len(texts)} entries, the graph {num_nodes} nodes")
    bad = next((i for i, t in enumerate(texts) if t is not None and not isinstance(t, (str, bytes))),
               None)
    if bad is not None:
        raise ValueError(f"Data.{attr}[{bad}] is {type(texts[bad]).__name__}, not a string")
    options = TokenizerOptions(path=tokenizer, vocab_size=vocab_size, max_tokens=max_tokens)

    def prepare(source: Any) -> None:
        attach_text(source, lambda scratch: list_source(list(texts), attr, f"Data.{attr}"),
                    options)

    return write_parts_store(parts, path, overwrite=overwrite, name=name, source_format="pyg",
                             label="Data", prepare=prepare)
