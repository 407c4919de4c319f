"""The MAG240M (OGB-LSC) layout -> a typed store, checked against ``ogb.lsc.MAG240MDataset``.

Also: nothing is unpickled (a ``split_dict.pt`` or ``meta.pt`` holding an object is
refused, an object ``.npy`` too), hostile arrays give one line naming the file, and a
feature file larger than a memory cap is ingested under that cap (memory-mapped a row
block at a time; ``shared/tools/memlimit.sh``).
"""

from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from graphpipe.cli.main import cli

from graphpipe.ingest import ingest
from graphpipe.ingest.errors import IngestError
from graphpipe.store import GraphStore
from graphpipe.store.validate import validate
from graphpipe.synthetic.mag240m import mag240m_dataset, write_feature_npy, write_mag240m

_ROOT = Path(__file__).resolve().parents[2]  # the checkout; shared/ sits in it or beside it
MEMLIMIT = Path(os.environ.get("GRAPHPIPE_MEMLIMIT") or next(
    (p for p in (_ROOT / "shared", _ROOT.parent / "shared", _ROOT.parent.parent / "shared")
     if (p / "tools" / "memlimit.sh").is_file()), _ROOT / "shared") / "tools" / "memlimit.sh")


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    data = mag240m_dataset(papers=800, authors=500, institutions=12, num_classes=6,
                           feature_dim=12, seed=2)
    root = tmp_path_factory.mktemp("lsc") / "root"
    write_mag240m(root, data)
    return data, root


def _edges(store, etype) -> np.ndarray:
    indptr, indices = store.typed_csc(etype)
    eid = store.typed_edge_ids(etype)
    out = np.empty((2, indices.shape[0]), dtype=np.int64)
    out[0, eid], out[1, eid] = indices, np.repeat(np.arange(indptr.shape[0] - 1), np.diff(indptr))
    return out


def test_equal_to_ogb_lsc_reader(generated, tmp_path):
    from ogb.lsc import MAG240MDataset

    _, root = generated
    copy = tmp_path / "root"
    shutil.copytree(root, copy)
    dataset = MAG240MDataset(str(copy))
    store = ingest(root, tmp_path / "s")
    assert store.num_nodes_dict == {"paper": dataset.num_papers, "author": dataset.num_authors,
                                    "institution": dataset.num_institutions}
    for (src, dst), rel in MAG240MDataset.__rels__.items():
        np.testing.assert_array_equal(_edges(store, (src, rel, dst)), dataset.edge_index(src, dst))
    feat = store.typed_features("paper")
    assert feat.dtype == np.float16
    np.testing.assert_array_equal(feat, dataset.paper_feat)
    label = dataset.all_paper_label
    np.testing.assert_array_equal(store.typed_labels("paper"), np.where(np.isnan(label), -1, label))
    np.testing.assert_array_equal(store.typed_node_time("paper"), dataset.all_paper_year)
    split = dataset.get_idx_split()
    assert store.typed_split_names("paper") == ["train", "valid", "test"]
    for ours, theirs in (("train", "train"), ("valid", "valid"), ("test", "test-whole")):
        np.testing.assert_array_equal(store.typed_split("paper", ours), split[theirs])
    test = store.typed_split("paper", "test")
    np.testing.assert_array_equal(test[np.arange(test.size) % 5 < 3], split["test-dev"])
    assert store.typed_num_classes("paper") == dataset.num_classes
    assert validate(store.path) == []


def test_numpy_split_dict_and_raw_test_key(generated, tmp_path):
    _, root = generated
    copy = tmp_path / "root"
    shutil.copytree(root, copy)
    base = copy / "mag240m_kddcup2021"
    splits = torch.load(base / "split_dict.pt")
    torch.save({"train": splits["train"].numpy(), "valid": splits["valid"].numpy(),
                "test": splits["test-whole"].numpy()}, base / "split_dict.pt")
    store = ingest(copy, tmp_path / "s")
    np.testing.assert_array_equal(store.typed_split("paper", "test"), splits["test-whole"].numpy())


PWNED = Path(tempfile.gettempdir()) / "graphpipe-pwned"  # what the payload would create


class Payload:
    """Unpickling this would run ``__reduce__``: loading must refuse it first."""

    def __reduce__(self):
        return (os.system, (f"touch {PWNED}",))


def _pickle_split(base: Path) -> str:
    torch.save({"train": Payload()}, base / "split_dict.pt")
    return "split_dict.pt"


def _pickle_meta(base: Path) -> str:
    torch.save({"paper": 800, "author": Payload(), "institution": 12}, base / "meta.pt")
    return "meta.pt"


def _object_npy(base: Path) -> str:
    np.save(base / "processed/paper/node_year.npy", np.array([object()] * 800), allow_pickle=True)
    return "node_year.npy"


def _edge_shape(base: Path) -> str:
    np.save(base / "processed/paper___cites___paper/edge_index.npy", np.zeros((3, 5), np.int64))
    return "edge_index.npy"


def _edge_range(base: Path) -> str:
    path = base / "processed/author___writes___paper/edge_index.npy"
    edges = np.load(path)
    edges[1, 7] = 800
    np.save(path, edges)
    return "edge_index.npy"


def _feature_rows(base: Path) -> str:
    path = base / "processed/paper/node_feat.npy"
    np.save(path, np.load(path)[:-1])
    return "node_feat.npy"


def _truncated_npy(base: Path) -> str:
    path = base / "processed/paper/node_feat.npy"
    path.write_bytes(path.read_bytes()[:-100])
    return "node_feat.npy"


def _label_shape(base: Path) -> str:
    np.save(base / "processed/paper/node_label.npy", np.zeros((800, 2), np.float32))
    return "node_label.npy"


def _bad_meta(base: Path) -> str:
    torch.save({"paper": -5, "author": 500, "institution": 12}, base / "meta.pt")
    return "meta.pt"


def _bad_type(base: Path) -> str:
    (base / "processed/author___writes___paper").rename(base / "processed/author___writes___venue")
    return "author___writes___venue"


def _duplicate_split(base: Path) -> str:
    splits = torch.load(base / "split_dict.pt", weights_only=False)
    ids = np.asarray(splits["train"]).copy()
    ids[1] = ids[0]
    torch.save({**splits, "train": ids}, base / "split_dict.pt")
    return "split_dict.pt"


def _year(value):
    def edit(base: Path) -> str:
        path = base / "processed/paper/node_year.npy"
        years = np.load(path).astype(np.float64)
        years[3] = value
        np.save(path, years)
        return "node_year.npy: line 4"
    edit.__name__ = f"_year_{value}"
    return edit


HOSTILE = {f.__name__[1:]: f for f in (_pickle_split, _pickle_meta, _object_npy, _edge_shape,
                                       _edge_range, _feature_rows, _truncated_npy, _label_shape,
                                       _bad_meta, _bad_type, _duplicate_split, _year(np.nan),
                                       _year(-5))}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile(generated, tmp_path, case):
    _, root = generated
    bad = tmp_path / "bad"
    shutil.copytree(root, bad)
    named = HOSTILE[case](bad / "mag240m_kddcup2021")
    result = CliRunner().invoke(cli, ["ingest", str(bad), str(tmp_path / "s"), "-q"])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and named in lines[0], lines
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad"]
    assert not PWNED.exists()
    with pytest.raises(IngestError):
        ingest(bad, tmp_path / "s2")


def test_cli_generate_and_ingest(tmp_path):
    runner = CliRunner()
    result = runner.invoke(cli, ["generate", "mag240m", str(tmp_path / "g"), "--papers", "300",
                                 "--authors", "100", "--institutions", "5", "--feature-dim", "8"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "g/mag240m_kddcup2021/processed/paper/node_feat.npy").is_file()
    result = runner.invoke(cli, ["ingest", str(tmp_path / "g"), str(tmp_path / "s"), "-q"])
    assert result.exit_code == 0 and "3 relations" in result.output, result.output


ROWS, DIM, CAP = 700_000, 256, "320M"  # 358 MB (341 MiB) of float16 features under a 320 MiB cap


def _block(start: int, count: int) -> np.ndarray:
    rows = (start + np.arange(count, dtype=np.int64))[:, None] * 31 + np.arange(DIM)[None]
    return ((rows % 1000) / 8).astype(np.float16)  # exact in float16


@pytest.mark.slow
def test_feature_file_larger_than_memory_cap(tmp_path):
    if not MEMLIMIT.is_file():
        pytest.skip("shared/tools/memlimit.sh not found")
    base = tmp_path / "big" / "mag240m_kddcup2021"
    (base / "processed/paper").mkdir(parents=True)
    (base / "processed/author___writes___paper").mkdir()
    write_feature_npy(base / "processed/paper/node_feat.npy", ROWS, DIM, 1 << 15, _block)
    np.save(base / "processed/author___writes___paper/edge_index.npy",
            np.array([[0, 1, 2], [5, ROWS - 1, 5]], dtype=np.int64))
    torch.save({"paper": ROWS, "author": 3}, base / "meta.pt")
    code = (f"from graphpipe.ingest import ingest; "
            f"ingest({str(tmp_path / 'big')!r}, {str(tmp_path / 's')!r})")
    run = subprocess.run([str(MEMLIMIT), "--keep-caches", CAP, sys.executable, "-c", code], capture_output=True,
                         text=True, timeout=600, check=False)
    if run.returncode == 3 and "no writable memory cgroup" in run.stderr:
        pytest.skip("no memory cgroup here")
    assert run.returncode == 0, run.stderr[-2000:]
    assert "peak=" in run.stderr
    feat = GraphStore.open(tmp_path / "s").typed_features("paper")
    assert feat.shape == (ROWS, DIM) and feat.dtype == np.float16
    for start in range(0, ROWS, 1 << 17):
        np.testing.assert_array_equal(feat[start:start + (1 << 17)], _block(start, min(1 << 17, ROWS - start)))


def test_reverse_edges(generated, tmp_path):
    from graphpipe.ingest import IngestOptions

    data, root = generated
    store = ingest(root, tmp_path / "s", IngestOptions(add_reverse_edges=True))
    assert len(store.edge_types) == 2 * len(data.edges)
    for (src, rel, dst), (s, d) in data.edges.items():
        np.testing.assert_array_equal(_edges(store, (dst, f"rev_{rel}", src)), np.stack([d, s]))


def test_a_full_disk_is_one_line_and_the_old_store_stays(generated, tmp_path):
    """A typed ingest --overwrite that cannot write its files (RLIMIT_FSIZE: a write past
    20 KiB fails with EFBIG, as ENOSPC would; no privileges needed): one line, exit 2, no
    temporary left, the store it was to replace intact and valid."""
    _, root = generated
    dest = tmp_path / "store"
    ingest(root, dest)
    before = {p: p.read_bytes() for p in dest.rglob("*") if p.is_file()}
    limits = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of the signal
    resource.setrlimit(resource.RLIMIT_FSIZE, (20 << 10, limits[1]))
    try:
        result = CliRunner().invoke(cli, ["ingest", str(root), str(dest), "-q", "--overwrite"])
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, limits)
        signal.signal(signal.SIGXFSZ, handler)
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "file too large (errno EFBIG)" in lines[0] and str(dest) in lines[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store"]
    assert {p: p.read_bytes() for p in dest.rglob("*") if p.is_file()} == before
    assert validate(dest) == []
