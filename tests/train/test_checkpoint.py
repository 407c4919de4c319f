"""Checkpoints are untrusted input (issue 14, item 8): a digest over the whole state is
checked on load, nothing pickled runs, and a damaged file is a one-line error (exit 2
from ``graphpipe train --resume``), never a run resumed from damaged weights."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from graphpipe.store import StoreWriter
from graphpipe.train.checkpoint import (
    CheckpointError,
    load_checkpoint,
    rng_state,
    save_checkpoint,
    state_digest,
)

MARK = torch.arange(257, dtype=torch.float32) * 1.2345  # bytes easy to find in the file


def _state() -> dict:
    model = torch.nn.Linear(6, 3)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    model(torch.ones(2, 6)).sum().backward()
    opt.step()
    return {"model_config": {"name": "sage", "hidden": 3, "dropout": 0.5, "norm": None},
            "model_class": "Linear", "model_state": {**model.state_dict(), "mark": MARK.clone()},
            "optimizer": {"name": "adam", "lr": 0.01}, "optimizer_state": opt.state_dict(),
            "epoch": 1, "history": [{"loss": float("nan"), "ok": True, "t": (1, 2.5)}],
            "rng": rng_state(), "loader": {"seed": 3, "epoch": 1}, "bf16": torch.ones(3, dtype=torch.bfloat16)}


def _equal(a, b) -> bool:
    return state_digest(a) == state_digest(b)


def test_round_trip_keeps_everything(tmp_path):
    state = _state()
    save_checkpoint(tmp_path / "c.pt", state)
    loaded = load_checkpoint(tmp_path / "c.pt")
    assert "digest" not in loaded and loaded["version"] == 2
    assert _equal({"format": loaded.pop("format"), "version": loaded.pop("version"), **state},
                  {"format": "graphpipe-train-checkpoint", "version": 2, **loaded})
    assert torch.equal(loaded["model_state"]["mark"], MARK)


def test_digest_sees_types_and_values():
    assert state_digest({"a": 1}) != state_digest({"a": 1.0}) != state_digest({"a": True})
    assert state_digest({"a": [1]}) != state_digest({"a": (1,)})
    assert state_digest({"t": torch.zeros(2)}) != state_digest({"t": torch.zeros(2, dtype=torch.float64)})
    assert state_digest({"t": torch.zeros(2, 1)}) != state_digest({"t": torch.zeros(1, 2)})
    with pytest.raises(CheckpointError, match="not ndarray"):
        state_digest({"x": np.zeros(2)})


def test_flipped_weight_byte_is_refused(tmp_path):
    path = tmp_path / "c.pt"
    save_checkpoint(path, _state())
    data = bytearray(path.read_bytes())
    at = bytes(data).find(MARK.numpy().tobytes())
    assert at > 0
    data[at + 4 * 100 + 3] ^= 0x40  # one weight becomes another finite number, or inf
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=r"is corrupt: its contents do not match the digest"):
        load_checkpoint(path)


def _flip_every(path: Path, step: int) -> tuple[int, int]:
    """Flip each ``step``-th byte in turn: every load must refuse or give the saved state."""
    original = path.read_bytes()
    want = state_digest(load_checkpoint(path))
    refused = 0
    for i in range(0, len(original), step):
        data = bytearray(original)
        data[i] ^= 0xFF
        path.write_bytes(bytes(data))
        try:
            got = load_checkpoint(path)
        except CheckpointError as exc:
            assert "\n" not in str(exc)
            refused += 1
            continue
        assert state_digest(got) == want, f"byte {i}: a damaged checkpoint loaded as another state"
    path.write_bytes(original)
    return len(range(0, len(original), step)), refused


def test_flipped_bytes_sampled(tmp_path):
    save_checkpoint(tmp_path / "c.pt", _state())
    total, refused = _flip_every(tmp_path / "c.pt", 61)
    assert refused > total // 2


@pytest.mark.slow
def test_every_flipped_byte(tmp_path):
    save_checkpoint(tmp_path / "c.pt", _state())
    total, refused = _flip_every(tmp_path / "c.pt", 1)
    assert refused > total // 2


def test_version_1_without_digest_is_refused(tmp_path):
    torch.save({"format": "graphpipe-train-checkpoint", "version": 1, **_state()}, tmp_path / "v1.pt")
    with pytest.raises(CheckpointError, match="has version 1; .* reads version 2"):
        load_checkpoint(tmp_path / "v1.pt")


class _Payload:
    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def test_pickled_code_never_runs(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.pt"
    torch.save({"format": "graphpipe-train-checkpoint", "version": 2, "x": _Payload(marker)}, path)
    with pytest.raises(CheckpointError, match="is corrupt or not a torch file"):
        load_checkpoint(path)
    path.write_bytes(pickle.dumps({"format": "graphpipe-train-checkpoint", "x": _Payload(marker)}))
    with pytest.raises(CheckpointError):
        load_checkpoint(path)
    assert not marker.exists()


def test_cli_resume_from_a_damaged_checkpoint_exits_2(tmp_path):
    from graphpipe.cli.train import command

    n = 64
    rng = np.random.default_rng(0)
    dst, src = np.repeat(np.arange(n), 4), rng.integers(0, n, 4 * n)
    with StoreWriter(tmp_path / "s") as w:
        w.write_array("csc/indptr", np.arange(0, 4 * n + 1, 4, dtype=np.int64))
        w.write_array("csc/indices", src[np.argsort(dst, kind="stable")].astype(np.int32))
        w.write_array("node/feat", rng.standard_normal((n, 4)).astype(np.float32))
        w.write_array("node/label", rng.integers(0, 2, n))
        w.write_splits({"train": np.arange(32), "valid": np.arange(32, 48), "test": np.arange(48, n)})
        w.manifest.update(num_nodes=n, num_edges=4 * n, node_features={"dim": 4, "dtype": "float32"},
                          labels={"shape": [n], "dtype": "int64", "task_type": "multiclass",
                                  "num_classes": 2})
        w.commit()
    ckpt = tmp_path / "c.pt"
    args = [str(tmp_path / "s"), "--model", "sage", "--hidden", "8", "--layers", "2", "--fanouts", "3,2",
            "--batch-size", "16", "--max-steps", "1", "--checkpoint", str(ckpt), "--quiet"]
    assert CliRunner().invoke(command, [*args, "--epochs", "1"]).exit_code == 0
    state = torch.load(ckpt, weights_only=True)
    weight = next(iter(state["model_state"].values())).numpy().tobytes()
    data = bytearray(ckpt.read_bytes())
    data[bytes(data).find(weight) + 2] ^= 0x01
    ckpt.write_bytes(bytes(data))
    before = ckpt.read_bytes()
    result = CliRunner().invoke(command, [*args, "--epochs", "2", "--resume", str(ckpt)])
    assert result.exit_code == 2, result.output
    assert result.output.startswith("error: checkpoint") and "is corrupt" in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert ckpt.read_bytes() == before
