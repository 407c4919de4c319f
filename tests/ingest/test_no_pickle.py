"""No file a dataset folder brings is ever unpickled.

A pickle whose loading would create a marker file is placed everywhere a dataset
file is read (``split_dict.pt``, ``processed/data_processed``, ``raw/data.npz``,
``raw/node-label.npz``, a ``.npz`` edge list, a ``--node-features`` ``.npy``); each
time ``graphpipe ingest`` must exit 2 with one line naming the file, no traceback,
no store, and no marker. A control test shows the payload does run when unpickled.
"""

from __future__ import annotations

import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from graphpipe.cli.main import cli

from graphpipe.ingest import ingest
from graphpipe.ingest.errors import IngestError
from graphpipe.ingest.safe_load import load_torch_file
from graphpipe.synthetic import community_graph, write_ogb_raw


class Payload:
    """Unpickling this runs ``touch marker`` (what an attacker's file would do)."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


class PathPayload(Payload):
    """The same through a method call instead of a shell."""

    def __reduce__(self):
        return Path.touch, (Path(self.marker),)


@pytest.fixture(scope="module")
def graph():
    return community_graph(80, 3, avg_degree=4, feature_dim=4, seed=3)


@pytest.fixture
def marker(tmp_path) -> Path:
    return tmp_path / "PWNED"


def _folder(tmp_path: Path, graph, *, binary: bool = False) -> Path:
    return write_ogb_raw(tmp_path / ("ds_npz" if binary else "ds"), graph, binary=binary)


def _save(obj, path: Path, how: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if how == "pickle":
        path.write_bytes(pickle.dumps(obj, protocol=2))
    else:
        torch.save(obj, path, pickle_protocol=4 if how == "torch4" else 2)


def _assert_refused(args: list[str], marker: Path, dest: Path, names: str) -> str:
    result = CliRunner().invoke(cli, ["ingest", *args, str(dest), "--quiet"])
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit), result.exception
    assert len(lines) == 1 and lines[0].startswith("error: ") and names in lines[0], lines
    assert "Traceback" not in result.output
    assert not marker.exists(), "the dataset's pickle ran"
    assert not dest.exists()
    return lines[0]


def test_payload_is_live(tmp_path, marker):
    """Control: unpickled, the payloads do create the marker (so the tests below can fail)."""
    for payload in (Payload(marker), PathPayload(marker)):
        code = f"import pickle,sys; pickle.loads(bytes.fromhex({pickle.dumps(payload).hex()!r}))"
        subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parent)
        assert marker.exists()
        marker.unlink()


@pytest.mark.parametrize("how", ["torch", "torch4", "pickle"])
@pytest.mark.parametrize("payload_cls", [Payload, PathPayload])
def test_split_dict_pickle_refused(tmp_path, graph, marker, how, payload_cls):
    folder = _folder(tmp_path, graph)
    split_dir = folder / "split" / "random"
    _save({"train": np.arange(3), "valid": payload_cls(marker), "test": np.arange(2)},
          split_dir / "split_dict.pt", how)
    line = _assert_refused([str(folder)], marker, tmp_path / "store", "split/random/split_dict.pt")
    assert "--from-raw" in line  # the CSV splits beside it are the way forward
    # --from-raw reads split/random/*.csv.gz and never opens split_dict.pt
    result = CliRunner().invoke(cli, ["ingest", str(folder), str(tmp_path / "store"), "--quiet", "--from-raw"])
    assert result.exit_code == 0, result.output
    assert not marker.exists()


@pytest.mark.parametrize("how", ["torch", "torch4", "pickle"])
def test_processed_pickle_refused(tmp_path, graph, marker, how):
    folder = _folder(tmp_path, graph)
    shutil.rmtree(folder / "raw")
    _save({"graph": {"edge_index": np.zeros((2, 1), np.int64), "num_nodes": Payload(marker)},
           "labels": np.zeros(1)}, folder / "processed" / "data_processed", how)
    line = _assert_refused([str(folder)], marker, tmp_path / "store", "processed/data_processed")
    assert "raw/" in line
    result = CliRunner().invoke(cli, ["ingest", str(folder), str(tmp_path / "store"), "--quiet", "--from-raw"])
    assert result.exit_code == 2 and "--from-raw: found neither raw/edge.csv.gz nor raw/data.npz" in result.output
    assert not marker.exists()


@pytest.mark.parametrize("member", ["edge_index", "node_feat", "num_nodes_list"])
def test_raw_npz_object_member_refused(tmp_path, graph, marker, member):
    folder = _folder(tmp_path, graph, binary=True)
    path = folder / "raw" / "data.npz"
    with np.load(path) as data:
        arrays = dict(data)
    arrays[member] = np.array([Payload(marker)], dtype=object)
    np.savez(path, **arrays)
    _assert_refused([str(folder)], marker, tmp_path / "store", f"raw/data.npz: member {member!r} refused")


def test_label_npz_object_member_refused(tmp_path, graph, marker):
    folder = _folder(tmp_path, graph, binary=True)
    np.savez(folder / "raw" / "node-label.npz", node_label=np.array([PathPayload(marker)], dtype=object))
    _assert_refused([str(folder)], marker, tmp_path / "store", "raw/node-label.npz: member 'node_label' refused")


def test_edge_list_npz_object_member_refused(tmp_path, marker):
    path = tmp_path / "graph.npz"
    np.savez(path, src=np.array([0, 1]), dst=np.array([Payload(marker), 0], dtype=object))
    _assert_refused([str(path)], marker, tmp_path / "store", "graph.npz")


def test_node_features_npy_object_refused(tmp_path, marker):
    (tmp_path / "edges.csv").write_text("src,dst\n0,1\n1,0\n")
    np.save(tmp_path / "feat.npy", np.array([[Payload(marker)], [0]], dtype=object))
    _assert_refused([str(tmp_path / "edges.csv"), "--node-features", str(tmp_path / "feat.npy")],
                    marker, tmp_path / "store", "feat.npy")


def test_cli_process_exit_code_and_one_line(tmp_path, graph, marker):
    """The real process (not click's runner): exit status 2, one line on stderr."""
    folder = _folder(tmp_path, graph)
    _save({"train": Payload(marker)}, folder / "split" / "random" / "split_dict.pt", "torch")
    proc = subprocess.run([sys.executable, "-m", "graphpipe.cli.main", "ingest", str(folder),
                           str(tmp_path / "store"), "--quiet"], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "split_dict.pt: refused" in proc.stderr
    assert not marker.exists() and not (tmp_path / "store").exists()


def test_plain_split_dict_is_read_like_the_csv_splits(tmp_path, graph):
    """OGB's own split_dict.pt format (a dict of int64 arrays, torch.save) still reads."""
    folder = _folder(tmp_path, graph)
    from_csv = ingest(folder, tmp_path / "a")
    split_dir = folder / "split" / "random"
    torch.save({n: from_csv.split(n)[::-1].copy() for n in ("train", "valid", "test")},
               split_dir / "split_dict.pt")
    for name in ("train", "valid", "test"):
        (split_dir / f"{name}.csv.gz").unlink()
    from_dict = ingest(folder, tmp_path / "b")
    for name in ("train", "valid", "test"):
        np.testing.assert_array_equal(from_dict.split(name), from_csv.split(name))


def test_ogb_processed_file_is_refused_not_unpickled(tmp_path, graph):
    """OGB writes data_processed with pickle protocol 4, which the weights-only loader
    cannot read: refused with the way forward, even though its content is harmless."""
    path = tmp_path / "data_processed"
    torch.save({"graph": {"edge_index": np.zeros((2, 1), np.int64), "num_nodes": 2},
                "labels": np.zeros(2)}, path, pickle_protocol=4)
    with pytest.raises(IngestError, match=r"^dp: refused: .*; use raw$"):
        load_torch_file(path, "dp", way_out="use raw")
    torch.save({"graph": {"edge_index": np.zeros((2, 1), np.int64), "num_nodes": np.int64(2)}},
               path)
    assert int(load_torch_file(path, "dp")["graph"]["num_nodes"]) == 2


@pytest.mark.parametrize("value, message", [
    (np.array(["a"]), "refused"),
    ({"x": {1, 2}}, "type set refused"),
    (torch.nn.Linear(1, 1), "refused"),
])
def test_non_plain_content_refused(tmp_path, value, message):
    path = tmp_path / "f.pt"
    torch.save({"train": value}, path)
    with pytest.raises(IngestError, match=message):
        load_torch_file(path, "f.pt")

