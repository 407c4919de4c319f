"""Streaming .npz members (graphpipe.ingest.npz_stream) against np.load, and hostile archives."""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import pytest

from graphpipe.ingest.errors import IngestError
from graphpipe.ingest.npz_stream import (
    iter_edge_blocks,
    iter_row_blocks,
    list_members,
    read_whole,
)


def _save(path: Path, compressed: bool, **arrays) -> Path:
    (np.savez_compressed if compressed else np.savez)(path, **arrays)
    return path


def _one_line_error(fn, match: str) -> str:
    with pytest.raises(IngestError, match=match) as info:
        fn()
    assert "\n" not in str(info.value)
    return str(info.value)


ARRAYS = {
    "f32_rows": np.arange(513 * 7, dtype=np.float32).reshape(513, 7) / 3,
    "i64_flat": np.arange(1001, dtype=np.int64) * -7,
    "u8_flat": (np.arange(999) % 251).astype(np.uint8),
    "f64_3d": np.linspace(-1, 1, 3 * 4 * 5).reshape(3, 4, 5),
    "f16": np.arange(90, dtype=np.float16).reshape(30, 3),
    "bool": (np.arange(100) % 3 == 0).reshape(50, 2),
    "big_endian": np.arange(300, dtype=">f4").reshape(100, 3),
    "fortran_column": np.asfortranarray(np.arange(40, dtype=np.int32).reshape(40, 1)),
    "empty": np.zeros((0, 4), dtype=np.float32),
    "zero_width": np.zeros((6, 0), dtype=np.float32),
    "one": np.array([42], dtype=np.int16),
}


@pytest.mark.parametrize("compressed", [True, False], ids=["deflated", "stored"])
@pytest.mark.parametrize("block_bytes, piece_bytes", [(1, 1), (37, 5), (100, 4096), (1 << 20, 7)])
def test_row_blocks_equal_np_load(tmp_path, compressed, block_bytes, piece_bytes):
    path = _save(tmp_path / "a.npz", compressed, **ARRAYS)
    members = list_members(path)
    assert sorted(members) == sorted(ARRAYS)
    with np.load(path) as expected:
        for key, member in members.items():
            assert member.stored is not compressed and member.shape == ARRAYS[key].shape
            blocks = list(iter_row_blocks(member, block_bytes, piece_bytes=piece_bytes))
            firsts = [first for first, _ in blocks]
            sizes = [len(block) for _, block in blocks]
            assert firsts == list(np.cumsum([0] + sizes)[:-1])
            row_bytes = max(1, member.row_elements * member.dtype.itemsize)
            assert all(b.nbytes <= max(block_bytes, row_bytes) for _, b in blocks), key
            got = np.concatenate([b for _, b in blocks]) if blocks else expected[key][:0]
            assert got.dtype.isnative and got.dtype == expected[key].dtype.newbyteorder("=")
            assert got.shape == expected[key].shape, key
            assert got.tobytes() == expected[key].astype(got.dtype).tobytes(), key
            assert np.array_equal(read_whole(member), expected[key]), key


@pytest.mark.parametrize("compressed", [True, False], ids=["deflated", "stored"])
@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint64])
def test_edge_blocks_pair_rows(tmp_path, compressed, order, dtype):
    rng = np.random.default_rng(1)
    edge_index = np.asarray(rng.integers(0, 1000, (2, 10_007)), dtype=dtype, order=order)
    path = _save(tmp_path / "e.npz", compressed, edge_index=edge_index)
    member = list_members(path)["edge_index"]
    assert member.fortran_order == (order == "F")
    for block_edges in (1_000, 4_099, 1 << 22):
        blocks = list(iter_edge_blocks(member, block_edges, piece_bytes=3_001))
        assert [first for first, _, _ in blocks] == list(range(0, 10_007, min(block_edges, 10_007)))
        assert all(len(s) == len(d) <= block_edges for _, s, d in blocks)
        src = np.concatenate([s for _, s, _ in blocks])
        dst = np.concatenate([d for _, _, d in blocks])
        assert src.dtype == dst.dtype == np.int64
        assert np.array_equal(src, edge_index[0]) and np.array_equal(dst, edge_index[1])


def test_closing_an_edge_stream_early(tmp_path):
    path = _save(tmp_path / "e.npz", True, edge_index=np.arange(20_000).reshape(2, -1))
    blocks = iter_edge_blocks(list_members(path)["edge_index"], 1000)
    first, src, dst = next(blocks)
    assert (first, src[0], dst[0]) == (0, 0, 10_000)
    blocks.close()  # joins the reading thread, closes both streams


# -- hostile input ----------------------------------------------------------------------------

def _write_raw_member(path: Path, name: str, payload: bytes, compressed: bool = True) -> None:
    mode = zipfile.ZIP_DEFLATED if compressed else zipfile.ZIP_STORED
    with zipfile.ZipFile(path, "w", compression=mode) as archive:
        archive.writestr(name, payload)


def _npy_bytes(array: np.ndarray, shape=None) -> bytes:
    """The .npy file of ``array``, its header claiming ``shape`` when given."""
    import io

    header = {"descr": np.lib.format.dtype_to_descr(array.dtype), "fortran_order": False,
              "shape": array.shape if shape is None else shape}
    out = io.BytesIO()
    np.lib.format.write_array_header_1_0(out, header)
    return out.getvalue() + array.tobytes()


@pytest.mark.parametrize("compressed", [True, False])
@pytest.mark.parametrize("shape", [(200,), (50,), (10, 11), (0,)])
def test_header_lying_about_shape(tmp_path, compressed, shape):
    _write_raw_member(tmp_path / "a.npz", "x.npy", _npy_bytes(np.arange(100.0), shape), compressed)
    _one_line_error(lambda: list_members(tmp_path / "a.npz", "a.npz"),
                    r"a.npz\['x'\]: holds 800 bytes of data, but its header .* needs")


def test_object_and_structured_members_refused(tmp_path):
    np.savez(tmp_path / "o.npz", ok=np.arange(3), bad=np.array([{"x": 1}], dtype=object))
    _one_line_error(lambda: list_members(tmp_path / "o.npz", "o.npz"),
                    r"o.npz: member 'bad' refused \(dtype object")
    np.savez(tmp_path / "s.npz", names=np.array(["a", "b"]))
    _one_line_error(lambda: list_members(tmp_path / "s.npz", "s.npz"), "member 'names' refused")
    np.savez(tmp_path / "r.npz", rec=np.zeros(2, dtype=[("a", "i4"), ("b", "f4")]))
    _one_line_error(lambda: list_members(tmp_path / "r.npz", "r.npz"), "member 'rec' refused")


def test_bad_zip_and_bad_npy(tmp_path):
    (tmp_path / "junk.npz").write_bytes(b"this is not a zip file at all" * 10)
    _one_line_error(lambda: list_members(tmp_path / "junk.npz", "junk.npz"),
                    "junk.npz: not a readable .npz archive")
    np.save(tmp_path / "plain.npy", np.arange(3))
    _one_line_error(lambda: list_members(tmp_path / "plain.npy", "plain.npy"),
                    "plain.npy: not a readable .npz archive")
    _write_raw_member(tmp_path / "t.npz", "x.npy", b"hello, I am text")
    _one_line_error(lambda: list_members(tmp_path / "t.npz", "t.npz"), r"t.npz\['x'\]: not a .npy array")
    _one_line_error(lambda: list_members(tmp_path / "missing.npz", "missing.npz"), "file not found")


def test_truncated_archive(tmp_path):
    path = _save(tmp_path / "a.npz", True, x=np.random.default_rng(0).random(50_000))
    data = path.read_bytes()
    for cut in (len(data) // 2, len(data) - 30, 100):
        path.write_bytes(data[:cut])
        _one_line_error(lambda: list_members(path, "a.npz"), "a.npz")


def _corrupt_member_data(path: Path, name: str) -> None:
    """Overwrite bytes in the middle of a member's data, keeping the zip structure."""
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo(name)
    members = list_members(path)
    start = members[name.removesuffix(".npy")].data_start
    data = bytearray(path.read_bytes())
    middle = start + info.compress_size // 2
    data[middle:middle + 64] = bytes(64)
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("compressed", [True, False], ids=["deflated", "stored"])
def test_corrupt_member_data(tmp_path, compressed):
    x = np.random.default_rng(0).random((20_000, 4))
    path = _save(tmp_path / "a.npz", compressed, x=x)
    _corrupt_member_data(path, "x.npy")
    member = list_members(path, "a.npz")["x"]  # header intact: listed
    _one_line_error(lambda: list(iter_row_blocks(member, 1 << 16)),
                    r"a.npz\['x'\]: (truncated or corrupt member|CRC-32 mismatch)")


def test_deflated_stream_cut_short(tmp_path):
    """A member whose deflate stream ends half-way (the zip's sizes and CRC unchanged)."""
    import zlib

    payload = _npy_bytes(np.arange(50_000, dtype=np.int64))

    def deflate(data: bytes) -> bytes:
        packer = zlib.compressobj(6, zlib.DEFLATED, -15)
        return packer.compress(data) + packer.flush()

    full, half = deflate(payload), deflate(payload[:len(payload) // 2])
    assert len(half) < len(full)
    path = tmp_path / "cut.npz"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("x.npy", payload)
    raw = bytearray(path.read_bytes())
    start = list_members(path)["x"].data_start
    assert raw[start:start + len(full)] == full
    raw[start:start + len(full)] = half + bytes(len(full) - len(half))
    path.write_bytes(bytes(raw))
    member = list_members(path, "cut.npz")["x"]
    _one_line_error(lambda: list(iter_row_blocks(member, 1 << 14)),
                    r"cut.npz\['x'\]: truncated or corrupt member")


def test_fortran_matrix_and_oversized_small_member(tmp_path):
    path = _save(tmp_path / "a.npz", True, f=np.asfortranarray(np.ones((5, 3))), big=np.zeros(1000))
    members = list_members(path, "a.npz")
    _one_line_error(lambda: list(iter_row_blocks(members["f"])), "Fortran-ordered array")
    assert np.array_equal(read_whole(members["f"]), np.ones((5, 3)))
    _one_line_error(lambda: read_whole(members["big"], max_bytes=100), "8000 bytes, more than the 100")
    _one_line_error(lambda: list(iter_edge_blocks(members["f"])), r"must have shape \(2, E\)")
    np.savez(tmp_path / "fl.npz", edge_index=np.ones((2, 3)))
    _one_line_error(lambda: list(iter_edge_blocks(list_members(tmp_path / "fl.npz")["edge_index"])),
                    "expected integer node IDs")
