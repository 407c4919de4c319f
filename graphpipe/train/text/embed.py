"""LM embeddings of every node as a derived feature array (``graphpipe embed STORE --lm
PATH``), written in chunks and resumable.

:func:`embed_store` encodes nodes ``0..N-1`` in chunks of ``chunk_rows`` with the LM at
``lm_path`` (a local folder, safetensors only), mean-pooled after ``depth`` layers
(default all): float32 ``(N, hidden)``. Each finished chunk is saved at once under
``STORE/.embed-<name>/`` (a temporary file renamed into place), with the run's
parameters beside it; a run that stops (killed, out of time) and is started again with
the same parameters skips the chunks already there. When all chunks are there they are
copied, a chunk at a time, into ``derived/<name>`` (:class:`~graphpipe.store.StoreEditor`:
one atomic commit; the manifest's ``derived["lm_embed"]`` records the parameters), and
the work folder is removed. Memory: one chunk and the LM (:func:`embed_memory_need`; a
process that may not take it is refused up front, one line naming the need). Different
parameters with a work folder present are refused (remove it, or pass the same ones).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from graphpipe.memory import require
from graphpipe.store.work_folder import open_work, save_part
from graphpipe.train.text.lm import LMEncoder, build_lm, check_lm_folder
from graphpipe.train.text.tokens import TokenInputs

__all__ = ["embed_memory_need", "embed_store"]

DEFAULT_CHUNK_ROWS = 8192
EMBED_RUNTIME = 64 << 20
"""Bytes of torch's and transformers' runtime state an encoder run adds beyond its tensors."""


def embed_memory_need(lm_path: str | os.PathLike, rows: int, batch_size: int, max_len: int) -> int:
    """Bytes an embedding run takes beyond what the process holds when it starts: the LM's
    weights twice (the file read, then the parameters), one chunk of ``rows`` float32
    outputs, one batch's activations (``batch_size x max_len`` tokens of the hidden and
    intermediate widths, and the ``heads x max_len^2`` attention scores) and
    :data:`EMBED_RUNTIME`. From the folder's ``config.json`` and weights file."""
    folder = check_lm_folder(lm_path)
    config = json.loads((folder / "config.json").read_text())
    if not isinstance(config, dict):
        raise ValueError(f"{folder / 'config.json'}: not a JSON object")  # noqa: TRY004 - bad input
    hidden = int(config.get("hidden_size", 768))
    inter = int(config.get("intermediate_size", 4 * hidden))
    heads = int(config.get("num_attention_heads", 12))
    weights = (folder / "model.safetensors").stat().st_size
    tokens = batch_size * max_len
    activations = 4 * tokens * (6 * hidden + inter) + 8 * batch_size * heads * max_len * max_len
    return EMBED_RUNTIME + 2 * weights + 4 * rows * hidden + activations


def _work_dir(store: Any, name: str) -> Path:
    return Path(store.path) / f".embed-{name}"


def _params(store: Any, lm_path: Path, depth: int | None, max_len: int, name: str,
            fields: list[str]) -> dict[str, Any]:
    digest = hashlib.sha256((lm_path / "model.safetensors").read_bytes()).hexdigest()[:16]
    return {"lm": str(lm_path), "lm_sha256_16": digest, "depth": depth, "max_len": max_len,
            "key": f"derived/{name}", "fields": fields, "num_nodes": store.num_nodes}


@torch.no_grad()
def _encode_chunk(encoder: LMEncoder, inputs: TokenInputs, start: int, stop: int,
                  depth: int | None, batch_size: int) -> np.ndarray:
    out = np.zeros((stop - start, encoder.hidden), dtype=np.float32)
    for s in range(start, stop, batch_size):
        ids, mask = inputs.batch(np.arange(s, min(stop, s + batch_size)))
        device = next(encoder.parameters()).device
        out[s - start:s - start + ids.shape[0]] = encoder(
            ids.to(device), mask.to(device), depth=depth).cpu().numpy()
    return out


def embed_store(store: Any, lm_path: str | os.PathLike, *, name: str = "lm_emb",
                depth: int | None = None, max_len: int = 128, chunk_rows: int = DEFAULT_CHUNK_ROWS,
                batch_size: int = 64, fields: list[str] | None = None,
                progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Write ``derived/<name>`` (module docstring); returns the manifest entry."""
    from graphpipe.store.text import check_field_name, text_fields

    check_field_name(name)
    folder = check_lm_folder(lm_path)
    require(embed_memory_need(folder, min(chunk_rows, store.num_nodes), batch_size, max_len),
            "graphpipe embed")
    fields = fields or text_fields(store)
    params = _params(store, folder, depth, max_len, name, fields)
    if store.has_array(params["key"]):
        raise ValueError(f"{store.path}: {params['key']} already exists")
    inputs = TokenInputs.from_store(store, max_len, fields)
    encoder = LMEncoder(build_lm(path=folder, vocab_size=0)).eval()
    work = _work_dir(store, name)
    open_work(work, params, refuse="an unfinished embedding run with other parameters is "
              "there; pass the same ones to resume it, or remove the folder")
    n, t0, done_now = store.num_nodes, time.perf_counter(), 0
    for start in range(0, n, chunk_rows):
        part = work / f"part-{start:012d}.npy"
        stop = min(n, start + chunk_rows)
        if not part.is_file():
            save_part(part, _encode_chunk(encoder, inputs, start, stop, depth, batch_size))
            done_now += stop - start
        if progress is not None:
            progress(stop, n)
    entry = {"lm": params["lm"], "lm_sha256_16": params["lm_sha256_16"], "depth": depth,
             "max_len": max_len, "fields": fields, "key": params["key"], "dim": encoder.hidden,
             "pooling": "mean over real tokens", "chunk_rows": chunk_rows,
             "encoded_this_run": done_now, "seconds_this_run": round(time.perf_counter() - t0, 2)}
    _commit(store, work, params["key"], n, encoder.hidden, chunk_rows, entry, name)
    return entry


def _commit(store: Any, work: Path, key: str, n: int, dim: int, chunk_rows: int,
            entry: dict[str, Any], name: str) -> None:
    from graphpipe.store.writer import StoreEditor

    with StoreEditor(store.path) as editor:
        out = editor.create_array(key, (n, dim), np.float32)
        for start in range(0, n, chunk_rows):
            rows = np.load(work / f"part-{start:012d}.npy", allow_pickle=False)
            if rows.shape != (min(n, start + chunk_rows) - start, dim):
                raise ValueError(f"{work}: chunk at row {start} has shape {rows.shape}")
            out[start:start + rows.shape[0]] = rows
        derived = editor.manifest.get("derived") or {}
        derived[f"lm_embed:{name}"] = entry
        editor.manifest["derived"] = derived
        editor.commit()
    shutil.rmtree(work, ignore_errors=True)
    from graphpipe.store.manifest import read_manifest

    store.manifest = read_manifest(store.path)
