"""Link splits in a store: written, listed, read back; corrupt IDs refused on read."""

from __future__ import annotations

import numpy as np
import pytest

from graphpipe.store import CorruptStoreError, GraphStore, StoreEditor, StoreError, StoreWriter
from graphpipe.store.link import LinkSplit, link_split_names, read_link_split, write_link_split


def _store(tmp_path, **links: LinkSplit) -> GraphStore:
    with StoreWriter(tmp_path / "g") as w:
        w.write_array("csc/indptr", np.array([0, 1, 2, 3, 3]))
        w.write_array("csc/indices", np.array([1, 0, 1]))
        w.manifest.update(num_nodes=4, num_edges=3)
        for name, link in links.items():
            write_link_split(w, name, link, 4)
        w.commit()
    return GraphStore.open(tmp_path / "g")


def test_round_trip_every_array(tmp_path) -> None:
    full = LinkSplit(np.array([0, 1]), np.array([2, 3]), neg_src=np.array([3]), neg_dst=np.array([0]),
                     neg_dst2d=np.array([[1, 2], [0, 0]]), weight=np.array([0.5, 2.0], np.float32),
                     year=np.array([2019, 2020]))
    store = _store(tmp_path, train=LinkSplit(np.array([0]), np.array([1])), test=full)
    assert sorted(link_split_names(store)) == ["test", "train"]
    got = read_link_split(store, "test")
    for name, value in full.arrays().items():
        assert np.array_equal(getattr(got, name), value), name
    assert got.src.dtype == np.int64 and got.weight.dtype == np.float32
    assert store.manifest["link"]["splits"]["test"] == {
        "num_pos": 2, "num_neg": 1, "neg_per_pos": 2,
        "arrays": ["dst", "neg_dst", "neg_dst2d", "neg_src", "src", "weight", "year"]}
    with pytest.raises(StoreError, match="no link split 'valid'"):
        read_link_split(store, "valid")


@pytest.mark.parametrize("link, message", [
    (LinkSplit(np.array([0]), np.array([4])), "dst: node id 4 out of range"),
    (LinkSplit(np.array([0, 1]), np.array([1])), "dst: shape"),
    (LinkSplit(np.array([0]), np.array([1]), neg_src=np.array([1])), "together"),
    (LinkSplit(np.array([0.0]), np.array([1])), "src: dtype float64"),
])
def test_bad_split_refused_before_writing(tmp_path, link, message) -> None:
    with pytest.raises(StoreError, match=message):
        _store(tmp_path, train=link)
    assert not (tmp_path / "g").exists()


def test_corrupt_ids_in_a_store_are_refused_on_read(tmp_path) -> None:
    store = _store(tmp_path, train=LinkSplit(np.array([0]), np.array([1])))
    with StoreEditor(store.path) as editor:  # a store edited behind graphpipe's back
        editor.write_array("link/train/dst", np.array([9]), replace=True)
        editor.commit()
    with pytest.raises(CorruptStoreError, match="dst: node id 9 out of range"):
        read_link_split(GraphStore.open(store.path), "train")


def test_validate_reports_a_corrupt_link_split(tmp_path) -> None:
    from graphpipe.store.validate import validate

    store = _store(tmp_path, train=LinkSplit(np.array([0]), np.array([1])))
    assert validate(store.path) == []
    with StoreEditor(store.path) as editor:
        editor.write_array("link/train/src", np.array([0, 1]), replace=True)
        editor.commit()
    assert any("link split 'train'" in p and "shape" in p for p in validate(store.path))
