"""OGB link-property folders: the store against ogb's own LinkPropPredDataset reading the
same generated folder; hostile split files refused in one line, exit 2, nothing written."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from graphpipe.cli.main import cli

from graphpipe.ingest import IngestError, ingest
from graphpipe.ingest.safe_load import NUMPY_GLOBALS
from graphpipe.store import GraphStore
from graphpipe.store.link import link_split_names, read_link_split
from graphpipe.synthetic.link import link_dataset, ogb_link_meta_dict, write_ogb_link


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("ogbl")
    data = link_dataset(300, avg_degree=6, feature_dim=5, pool=30, seed=3)
    return {style: write_ogb_link(root / f"ogbl_{style}_like", data, style=style, num_neg=80,
                                  neg_per_source=7, seed=3)
            for style in ("collab", "citation2")}


def _oracle(folder: Path, style: str, tmp_path: Path) -> tuple[dict, dict]:
    from ogb.linkproppred import LinkPropPredDataset

    copy = shutil.copytree(folder, tmp_path / f"oracle_{style}")  # ogb writes processed/ there
    dataset = LinkPropPredDataset("ogbl-x", meta_dict=ogb_link_meta_dict(copy, style))
    with torch.serialization.safe_globals(NUMPY_GLOBALS):  # citation2-style files hold NumPy arrays
        return dataset[0], dataset.get_edge_split()


def _np(value) -> np.ndarray:
    return value.numpy() if isinstance(value, torch.Tensor) else np.asarray(value)


@pytest.mark.parametrize("style", ["collab", "citation2"])
def test_store_matches_ogb_reader(folders, style, tmp_path) -> None:
    graph, split = _oracle(folders[style], style, tmp_path)
    store = ingest(folders[style], tmp_path / "store")
    edge_index = graph["edge_index"]
    assert store.num_nodes == graph["num_nodes"] and store.num_edges == edge_index.shape[1]
    indptr, indices = store.topology()
    dst = np.repeat(np.arange(store.num_nodes), np.diff(indptr))
    if store.has_edge_ids:  # collab: each CSC slot names its column of OGB's edge_index
        eid = store.edge_id
        assert np.array_equal(edge_index[0, eid], indices) and np.array_equal(edge_index[1, eid], dst)
        assert np.array_equal(np.sort(eid), np.arange(edge_index.shape[1]))
        assert np.array_equal(store.array("csc/weight"), graph["edge_weight"][eid, 0])
        assert np.array_equal(store.array("csc/time"), graph["edge_year"][eid, 0])
    else:
        ours = np.lexsort((indices, dst))
        theirs = np.lexsort((edge_index[0], edge_index[1]))
        assert np.array_equal(indices[ours], edge_index[0, theirs])
        assert np.array_equal(dst[ours], edge_index[1, theirs])
        assert np.array_equal(store.array("nodes/time"), graph["node_year"][:, 0])
    np.testing.assert_allclose(store.feat, graph["node_feat"], rtol=1e-6)
    assert sorted(link_split_names(store)) == ["test", "train", "valid"]
    for name, entry in split.items():
        link = read_link_split(store, name)
        if style == "collab":
            assert np.array_equal(np.stack([link.src, link.dst], 1), _np(entry["edge"]))
            assert np.array_equal(link.weight, _np(entry["weight"]))
            assert np.array_equal(link.year, _np(entry["year"]))
            if "edge_neg" in entry:
                assert np.array_equal(np.stack([link.neg_src, link.neg_dst], 1), _np(entry["edge_neg"]))
        else:
            assert np.array_equal(link.src, _np(entry["source_node"]))
            assert np.array_equal(link.dst, _np(entry["target_node"]))
            if "target_node_neg" in entry:
                assert np.array_equal(link.neg_dst2d, _np(entry["target_node_neg"]))


class _Evil:
    def __reduce__(self):
        return (print, ("pwned",))


def _hostile(folder: Path, tmp_path: Path, content) -> Path:
    bad = shutil.copytree(folder, tmp_path / "bad")
    path = bad / "split" / "time" / "valid.pt"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        torch.save(content, path)
    return bad


_N = 300
_HOSTILE = {
    "pickled code": (_Evil(), "refused"),
    "out of range": ({"edge": torch.tensor([[0, _N]])}, "key 'edge': node id 300 out of range"),
    "negative id": ({"edge": torch.tensor([[0, 1]]), "edge_neg": torch.tensor([[-1, 2]])},
                    "key 'edge_neg': node id -1"),
    "negative out of range": ({"edge": torch.tensor([[0, 1]]), "edge_neg": torch.tensor([[2, _N]])},
                              "key 'edge_neg': node id 300 out of range"),
    "negative year": ({"edge": torch.tensor([[0, 1], [1, 2]]), "year": torch.tensor([2001, -5])},
                      "key 'year': row 2: year -5 is negative"),
    "bad shape": ({"edge": torch.tensor([0, 1, 2])}, "key 'edge': shape (3,), expected (n, 2)"),
    "float ids": ({"edge": torch.tensor([[0.0, 1.0]])}, "key 'edge': dtype float32"),
    "unknown key": ({"edge": torch.tensor([[0, 1]]), "head": torch.tensor([0])}, "unexpected key"),
    "weight rows": ({"edge": torch.tensor([[0, 1]]), "weight": torch.tensor([1, 2])},
                    "key 'weight': shape (2,), expected (1,)"),
    "not a dict": (torch.tensor([1, 2]), "expected a dict"),
    "garbage": (b"\x80\x04not a pickle at all", "refused"),
}


@pytest.mark.parametrize("case", sorted(_HOSTILE))
def test_hostile_split_file_is_one_line_exit_2_and_no_store(folders, tmp_path, case, capfd) -> None:
    content, message = _HOSTILE[case]
    bad = _hostile(folders["collab"], tmp_path, content)
    with pytest.raises(IngestError, match=re.escape(message)):
        ingest(bad, tmp_path / "lib-store")
    assert not (tmp_path / "lib-store").exists()
    result = CliRunner().invoke(cli, ["ingest", str(bad), str(tmp_path / "store")])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and "split/time/valid.pt" in lines[0] and "Traceback" not in result.output
    assert not (tmp_path / "store").exists()
    assert "pwned" not in capfd.readouterr().out


def test_citation2_negatives_must_match_sources(folders, tmp_path) -> None:
    bad = _hostile(folders["citation2"], tmp_path, {
        "source_node": np.array([0, 1]), "target_node": np.array([1, 2]),
        "target_node_neg": np.zeros((3, 4), dtype=np.int64)})
    with pytest.raises(IngestError, match="'target_node_neg': 3 rows"):
        ingest(bad, tmp_path / "store")


def test_generate_link_cli_then_ingest(tmp_path) -> None:
    dest = tmp_path / "gen"
    result = CliRunner().invoke(cli, ["generate", "link", str(dest), "--nodes", "120", "--pool", "20",
                                      "--num-neg", "30", "--quiet"])
    assert result.exit_code == 0, result.output
    store = GraphStore.open(ingest(dest, tmp_path / "s").path)
    assert store.manifest["graph"]["num_input_edges"] == store.num_edges  # inverse edges added
    assert store.manifest["graph"]["ogb_inverse_edges"] is True
    valid = read_link_split(store, "valid")
    assert valid.neg_src.shape == (30,) and valid.num_pos > 0
    info = CliRunner().invoke(cli, ["info", str(tmp_path / "s"), "--json"])
    assert info.exit_code == 0 and '"link_splits"' in info.output
    again = CliRunner().invoke(cli, ["generate", "link", str(dest), "--nodes", "120", "--pool", "20"])
    assert again.exit_code == 2 and "exists" in again.output


def test_ppa_layout_named_like_ogb(folders, tmp_path) -> None:
    """ogbl-ppa: 'edge' / 'edge_neg' only, no weights or years; the folder's OGB name picks
    add_inverse_edge from ogb's master.csv (and an explicit option overrides it)."""
    from ogb.linkproppred import LinkPropPredDataset

    ppa = shutil.copytree(folders["collab"], tmp_path / "ogbl_ppa")
    for name in ("edge_weight.csv.gz", "edge_year.csv.gz"):
        (ppa / "raw" / name).unlink()
    for part in ("train", "valid", "test"):
        path = ppa / "split" / "time" / f"{part}.pt"
        entry = torch.load(path, weights_only=True)
        torch.save({k: v for k, v in entry.items() if k in ("edge", "edge_neg")}, path)
    meta = {**ogb_link_meta_dict(ppa), "additional edge files": "None", "eval metric": "hits@100"}
    oracle = LinkPropPredDataset("ogbl-x", meta_dict=meta)[0]
    store = ingest(ppa, tmp_path / "store")
    assert store.num_edges == oracle["edge_index"].shape[1] and not store.has_array("csc/weight")
    eid = store.edge_id if store.has_edge_ids else None
    assert eid is None  # nothing per edge: no edge order needed
    directed = ingest(ppa, tmp_path / "directed", reader_options={"add_inverse_edge": False})
    assert directed.num_edges * 2 == store.num_edges
