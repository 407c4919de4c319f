"""The memory this process may use (:mod:`graphpipe.memory`): a cgroup tree laid out in
files as the kernel does (v1 and v2), and the real thing: a process capped by
``memlimit.sh`` sees its cap, and ``GraphStore.open(in_memory="auto")`` then leaves
features that do not fit as memory maps (skipped where memlimit.sh cannot make a cgroup)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from graphpipe.memory import cgroup_headroom, cgroup_limit, usable_memory
from graphpipe.store import StoreWriter

MEMLIMIT = Path(os.environ.get("GRAPHPIPE_MEMLIMIT") or
                Path(__file__).resolve().parents[2] / "shared" / "tools" / "memlimit.sh")


def _proc(tmp: Path, cgroup: str, mount_line: str) -> Path:
    proc = tmp / "proc"
    proc.mkdir()
    (proc / "cgroup").write_text(cgroup)
    (proc / "mountinfo").write_text(mount_line.replace("MNT", str(tmp / "cg")))
    return proc


def _write(folder: Path, **files: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name.replace("_", ".", 1)).write_text(text)


def test_v1_headroom_is_the_tightest_ancestor(tmp_path: Path) -> None:
    proc = _proc(tmp_path, "4:memory:/outer/inner\n0::/\n",
                 "35 31 0:32 / MNT rw,relatime - cgroup cgroup rw,memory\n")
    root = tmp_path / "cg"
    _write(root, memory_limit_in_bytes="9223372036854771712", memory_usage_in_bytes="5000")
    _write(root / "outer", memory_limit_in_bytes="1000000", memory_usage_in_bytes="900000", memory_stat="cache 1\ntotal_inactive_file 300000\n")
    _write(root / "outer" / "inner", memory_limit_in_bytes="9223372036854771712", memory_usage_in_bytes="800000")
    assert cgroup_headroom(proc) == 1000000 - (900000 - 300000)
    assert cgroup_limit(proc) == 1000000  # the tightest limit, "no limit" ignored


def test_v2_headroom_and_no_limit(tmp_path: Path) -> None:
    proc = _proc(tmp_path, "0::/job\n", "41 31 0:38 / MNT rw - cgroup2 cgroup2 rw\n")
    _write(tmp_path / "cg" / "job", memory_max="2000000", memory_current="2500000", memory_stat="anon 5\ninactive_file 100\n")
    assert cgroup_headroom(proc) == 0  # over the limit: nothing left, never negative
    (tmp_path / "cg" / "job" / "memory.max").write_text("max\n")
    assert cgroup_headroom(proc) is None and cgroup_limit(proc) is None
    assert cgroup_headroom(tmp_path / "missing") is None and cgroup_limit(tmp_path / "missing") is None
    assert 0 < usable_memory()


_CHILD = """
import sys
from graphpipe.memory import usable_memory
from graphpipe.store import GraphStore
store = GraphStore.open(sys.argv[1], in_memory="auto")
print(usable_memory(), "node/feat" in store.in_memory_arrays)
"""


def _run_capped(cap: str, store: Path) -> tuple[int, bool]:
    proc = subprocess.run([str(MEMLIMIT), "--keep-caches", cap, sys.executable, "-c", _CHILD, str(store)],
                          check=False, capture_output=True, text=True, timeout=120)
    if proc.returncode == 3:
        pytest.skip(f"memlimit.sh cannot make a memory cgroup here: {proc.stderr.strip()}")
    assert proc.returncode == 0, proc.stderr
    usable, loaded = proc.stdout.split()
    return int(usable), loaded == "True"


@pytest.mark.skipif(not MEMLIMIT.is_file(), reason="memlimit.sh not on this machine")
def test_auto_leaves_features_on_disk_under_a_cap(tmp_path: Path) -> None:
    n, dim = 320_000, 128  # 164 MB of features: more than half of a 300 MB cap
    with StoreWriter(tmp_path / "s") as w:
        w.write_array("csc/indptr", np.zeros(n + 1, dtype=np.int64))
        w.write_array("csc/indices", np.zeros(0, dtype=np.int32))
        w.write_array("node/feat", np.ones((n, dim), dtype=np.float32))
        w.manifest["num_nodes"], w.manifest["num_edges"] = n, 0
        w.manifest["node_features"] = {"dim": dim, "dtype": "float32"}
        w.commit()
    usable, loaded = _run_capped("300M", tmp_path / "s")
    assert usable <= 300 * 2**20 and not loaded
    usable, loaded = _run_capped("2G", tmp_path / "s")
    assert usable > 600 * 2**20 and loaded


def test_an_environment_limit_bounds_the_limit_and_the_room(monkeypatch) -> None:
    import psutil

    from graphpipe.memory import NotEnoughMemory, require

    rss = psutil.Process().memory_info().rss
    monkeypatch.setenv("GRAPHPIPE_MEMORY_LIMIT", str(rss + (64 << 20)))
    assert cgroup_limit() <= rss + (64 << 20)
    assert usable_memory() <= 64 << 20
    with pytest.raises(NotEnoughMemory, match=r"^a step needs about 1.0 GB .* from GRAPHPIPE_MEMORY_LIMIT\); raise"):
        require(1 << 30, "a step")
    monkeypatch.setenv("GRAPHPIPE_MEMORY_LIMIT", "2G")
    assert cgroup_limit() <= 2 << 30


@pytest.mark.parametrize("value", ["lots", "-1G", "0", "2X"])
def test_an_environment_limit_that_is_not_a_size_is_refused(monkeypatch, value: str) -> None:
    monkeypatch.setenv("GRAPHPIPE_MEMORY_LIMIT", value)
    with pytest.raises(ValueError, match="GRAPHPIPE_MEMORY_LIMIT must be a size"):
        usable_memory()
