"""The CSV reader on any bytes: same numbers as ``pyarrow.csv`` or both refuse, never a crash.

Everything that runs the Numba parser on hostile bytes runs in a child process
(``csv_fuzz_child.py``, or the ``graphpipe`` CLI), so a segfault fails the test
instead of killing pytest. The hypothesis fuzz runs ``GRAPHPIPE_FUZZ_EXAMPLES``
examples (200 by default; ``make fuzz`` runs 20,000).
"""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from graphpipe.synthetic import community_graph, write_ogb_raw

CHILD = Path(__file__).with_name("csv_fuzz_child.py")


def _run(args: list[str], timeout: float, **kwargs) -> subprocess.CompletedProcess:
    proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout, check=False, **kwargs)
    assert proc.returncode >= 0, f"killed by signal {-proc.returncode}:\n{proc.stderr[-4000:]}"
    return proc


def _child(*args: str, timeout: float = 300) -> str:
    proc = _run([sys.executable, str(CHILD), *args], timeout)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-6000:]
    return proc.stdout


def test_fuzz_against_pyarrow():
    examples = int(os.environ.get("GRAPHPIPE_FUZZ_EXAMPLES", "200"))
    assert f"ok: {examples} examples" in _child(str(examples), timeout=120 + examples * 0.2)


def test_every_odd_token_against_pyarrow():
    """Null words, signs, quotes, tabs, NUL, BOM, 19-digit integers... alone and mid-row."""
    assert "tokens" in _child("tokens")


def test_hostile_corpus_against_pyarrow():
    """Lone CR (the old segfault), NUL, BOM, non-UTF-8, quotes, long fields, random bytes."""
    assert "corpus files" in _child("corpus")


def _gz(path: Path, data: bytes) -> None:
    with gzip.open(path, "wb", compresslevel=6) as fh:
        fh.write(data)


def _cli_ingest(folder: Path, dest: Path) -> subprocess.CompletedProcess:
    return _run([sys.executable, "-m", "graphpipe.cli.main", "ingest", str(folder), str(dest), "--quiet"],
                timeout=180)


@pytest.fixture(scope="module")
def small_graph():
    return community_graph(40, 2, avg_degree=3, feature_dim=3, seed=5)


def test_old_mac_line_endings_ingest_like_unix(tmp_path, small_graph):
    """An OGB folder whose CSV files end lines with a lone CR reads as the LF original."""
    folder = write_ogb_raw(tmp_path / "ds", small_graph)
    cr = write_ogb_raw(tmp_path / "ds_cr", small_graph)
    for path in sorted((cr / "raw").glob("*.csv.gz")) + sorted((cr / "split").rglob("*.csv.gz")):
        _gz(path, gzip.decompress(path.read_bytes()).replace(b"\n", b"\r"))
    for src, dest in ((folder, tmp_path / "a"), (cr, tmp_path / "b")):
        proc = _cli_ingest(src, dest)
        assert proc.returncode == 0, proc.stderr
    check = ("from graphpipe.store import GraphStore; import numpy as np, sys; "
             "a, b = GraphStore.open(sys.argv[1]), GraphStore.open(sys.argv[2]); "
             "assert np.array_equal(a.indptr, b.indptr) and np.array_equal(a.indices, b.indices); "
             "assert np.array_equal(a.features(), b.features()) and np.array_equal(a.labels, b.labels); "
             "assert all(np.array_equal(a.split(n), b.split(n)) for n in ('train', 'valid', 'test'))")
    proc = _run([sys.executable, "-c", check, str(tmp_path / "a"), str(tmp_path / "b")], timeout=120)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("eol", [b"\r", b"\r\n", b"\n"])
def test_bad_field_names_the_physical_line(tmp_path, small_graph, eol):
    """Line numbers count physical lines whatever the ending, empty lines included."""
    folder = write_ogb_raw(tmp_path / "ds", small_graph)
    path = folder / "raw" / "edge.csv.gz"
    lines = gzip.decompress(path.read_bytes()).splitlines()
    lines[3] = b""  # an empty line: skipped, but counted
    lines[6] = b"1,x\x00y"
    _gz(path, eol.join(lines) + eol)
    proc = _cli_ingest(folder, tmp_path / "s")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == ["error: raw/edge.csv.gz: line 7: column 2: 'x\\x00y' is not a number"]
    assert not (tmp_path / "s").exists()


def test_long_line_without_ending_is_refused_in_linear_time(tmp_path, small_graph):
    """100 MB without a line ending: refused with the file named once 64 MiB are gathered."""
    folder = write_ogb_raw(tmp_path / "ds", small_graph)
    _gz(folder / "raw" / "edge.csv.gz", b"1" * (100 << 20))
    proc = _cli_ingest(folder, tmp_path / "s")
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and lines[0].endswith(
        "ds/raw/edge.csv.gz: a line starting at byte 0 is longer than 67108864 bytes "
        "(not a text table, or no line endings)"), lines


def test_long_line_in_tiny_reads_is_gathered_once(tmp_path):
    """A 4 MB line read 64 bytes at a time (65,536 pieces) is joined once, not re-copied per
    read (which took minutes); it parses to the right numbers."""
    code = ("import sys, numpy as np; from graphpipe.ingest.ogb import read_csv_table; "
            "t = read_csv_table(sys.argv[1], np.int64, block_bytes=64); "
            "assert t.shape == (2, 2 << 20) and (t[0] == 7).all() and (t[1] == 8).all(), t.shape")
    path = tmp_path / "wide.csv"
    path.write_bytes(b",".join([b"7"] * (2 << 20)) + b"\n" + b",".join([b"8"] * (2 << 20)))
    proc = _run([sys.executable, "-c", code, str(path)], timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_fast_path_and_pyarrow_agree_on_a_plain_block():
    """The fast parser's own numbers (no fallback) on ordinary rows, against pyarrow's."""
    code = ("import numpy as np; from graphpipe.ingest.csvparse import parse_block, parse_block_slow; "
            "rng = np.random.default_rng(0); v = rng.standard_normal((500, 3)); "
            "block = ''.join(f'{a:.6f},{b:.9g},{c:.15g}\\r\\n' for a, b, c in v).encode(); "
            "fast = parse_block(block, 3, np.float64, parts=7); slow = parse_block_slow(block, 3, np.float64); "
            "assert np.array_equal(fast, slow); "
            "i = parse_block(b'1,-2\\r3,4\\n\\n5,6', 2, np.int64); assert i.tolist() == [[1, -2], [3, 4], [5, 6]]")
    proc = _run([sys.executable, "-c", code], timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_numbers_unchanged_for_unix_files(tmp_path):
    """Sanity: a plain LF file with a BOM-free header-less table reads as numpy does."""
    path = tmp_path / "t.csv"
    values = np.arange(12, dtype=np.int64).reshape(4, 3) - 5
    path.write_text("\n".join(",".join(map(str, row)) for row in values) + "\n")
    code = ("import sys, numpy as np; from graphpipe.ingest.ogb import read_csv_table; "
            "print(read_csv_table(sys.argv[1], np.int64).tolist())")
    proc = _run([sys.executable, "-c", code, str(path)], timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == str(values.tolist()), proc.stderr
