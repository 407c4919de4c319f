"""Node text at ingest: the titleabs.tsv join (against pandas' merge, as TAPE reads
ogbn-arxiv), node-table text columns, a PyG Data's list, bad input refused with nothing
written, token IDs equal to the stored tokenizer's encoding of the stored strings."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from graphpipe.cli.main import cli

from graphpipe.ingest.errors import IngestError
from graphpipe.ingest.text import read_paper_ids, titleabs_source
from graphpipe.store import GraphStore
from graphpipe.store.text import read_texts, read_tokenizer_json, token_arrays
from graphpipe.synthetic.tag import tag_graph, write_tag
from graphpipe.text.tokenize import load_tokenizer


@pytest.fixture(scope="module")
def tag_folder(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("tag") / "tagx"
    graph, titles, abstracts = tag_graph(300, 4, seed=3)
    write_tag(folder, graph, titles, abstracts, seed=3)
    return folder


def _ingest(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["ingest", *args, "-q"])
    return result.exit_code, result.output


def _tape_join(folder: Path) -> pd.DataFrame:
    """What TAPE's load_arxiv does: merge the mapping with the TSV on the paper ID."""
    mapping = pd.read_csv(folder / "mapping" / "nodeidx2paperid.csv.gz", compression="gzip")
    raw = pd.read_csv(folder / "titleabs.tsv", sep="\t", header=None,
                      names=["paper id", "title", "abs"], quoting=3)
    return mapping.merge(raw, on="paper id", how="left").sort_values("node idx")


def test_titleabs_join_equals_pandas_merge(tag_folder: Path, tmp_path: Path) -> None:
    code, out = _ingest(str(tag_folder), str(tmp_path / "s"), "--text",
                        str(tag_folder / "titleabs.tsv"))
    assert code == 0, out
    store = GraphStore.open(tmp_path / "s")
    expect = _tape_join(tag_folder)
    title, abstract = read_texts(store, "title"), read_texts(store, "abstract")
    assert title == [None if pd.isna(t) else t for t in expect["title"]]
    assert abstract == [None if pd.isna(t) else t for t in expect["abs"]]
    entry = store.manifest["text"]
    missing = int(expect["title"].isna().sum())
    assert missing > 0 and entry["nodes_without_text"] == missing
    assert entry["unmatched_lines"] == 15 and entry["matched_lines"] == 300 - missing
    tok = load_tokenizer(read_tokenizer_json(store))
    for name, texts in (("title", title), ("abstract", abstract)):
        offsets, ids = token_arrays(store, name)
        for v in (0, 5, 17, 299):
            want = tok.encode(texts[v], add_special_tokens=False).ids[:256] if texts[v] else []
            assert ids[offsets[v]:offsets[v + 1]].tolist() == want


def test_bucketed_join_equals_one_bucket(tag_folder: Path, tmp_path: Path) -> None:
    paper = read_paper_ids(tag_folder, 300)
    tsv = tag_folder / "titleabs.tsv"

    def rows(bucket_bytes: int) -> list:
        source = titleabs_source(tsv, paper, tmp_path, bucket_bytes=bucket_bytes)
        out = []
        for start, cols in source.batches():
            assert start == len(out)
            out += list(zip(cols["title"], cols["abstract"]))
        return out

    assert rows(1 << 30) == rows(2000) and len(rows(2000)) == 300
    assert not (tmp_path / ".text-join").exists()


@pytest.mark.parametrize(("line", "message"), [
    ("notanumber\tt\ta\n", "line 1: paper id b'notanumber' is not an integer"),
    ("12345\n", "line 1: expected 'paper id<TAB>title<TAB>abstract'"),
    ("7\tt\xff\tabs\n", "line 1: byte 4 (0xff) is not UTF-8"),
])
def test_bad_tsv_is_one_line_exit_2_nothing_written(tag_folder: Path, tmp_path: Path,
                                                    line: str, message: str) -> None:
    bad = tmp_path / "bad.tsv"
    bad.write_bytes(line.encode("latin-1") + (tag_folder / "titleabs.tsv").read_bytes())
    code, out = _ingest(str(tag_folder), str(tmp_path / "s"), "--text", str(bad))
    assert code == 2 and message in out and len(out.strip().splitlines()) == 1, out
    assert not (tmp_path / "s").exists() and not list(tmp_path.glob(".s*"))


def test_a_100_mib_line_is_refused_unread(tag_folder: Path, tmp_path: Path) -> None:
    """Never buffered whole: refused at the 64 MiB line limit, naming the line."""
    bad = tmp_path / "big.tsv"
    with open(bad, "wb") as fh:
        fh.write((tag_folder / "titleabs.tsv").read_bytes())
        fh.write(b"7\t" + b"x" * (100 << 20) + b"\tabs\n")
    lines = len((tag_folder / "titleabs.tsv").read_bytes().splitlines())
    code, out = _ingest(str(tag_folder), str(tmp_path / "s"), "--text", str(bad))
    assert code == 2 and f"line {lines + 1}: longer than 64 MiB" in out, out
    assert not (tmp_path / "s").exists() and not list(tmp_path.glob(".s*"))


def test_duplicate_paper_line_is_refused(tag_folder: Path, tmp_path: Path) -> None:
    lines = (tag_folder / "titleabs.tsv").read_text().splitlines(keepends=True)
    paper = read_paper_ids(tag_folder, 300)
    matched = next(i for i, l in enumerate(lines) if int(l.split("\t")[0]) in set(paper.tolist()))
    bad = tmp_path / "dup.tsv"
    bad.write_text("".join(lines + [lines[matched]]))
    code, out = _ingest(str(tag_folder), str(tmp_path / "s"), "--text", str(bad))
    assert code == 2 and f"already on line {matched + 1}" in out, out
    assert not (tmp_path / "s").exists()


def test_mapping_is_checked(tmp_path: Path) -> None:
    folder = tmp_path / "f"
    (folder / "mapping").mkdir(parents=True)
    with gzip.open(folder / "mapping" / "nodeidx2paperid.csv.gz", "wt") as fh:
        fh.write("node idx,paper id\n0,10\n0,11\n")
    with pytest.raises(IngestError, match="line 3: node 0 out of range"):
        read_paper_ids(folder, 2)
    with pytest.raises(IngestError, match="not found"):
        read_paper_ids(tmp_path, 2)


def test_text_column_of_a_node_table(tmp_path: Path) -> None:
    edges = pd.DataFrame({"src": ["a", "b", "c"], "dst": ["b", "c", "a"]})
    nodes = pd.DataFrame({"id": ["a", "b", "c"], "label": [0, 1, 0],
                          "body": ["first paper", "", "third \u00e9t\u00e9 paper"]})
    edges.to_csv(tmp_path / "e.csv", index=False)
    nodes.to_parquet(tmp_path / "n.parquet")
    code, out = _ingest(str(tmp_path / "e.csv"), str(tmp_path / "s"), "--nodes",
                        str(tmp_path / "n.parquet"), "--label", "label", "--text-column", "body",
                        "--vocab-size", "40", "--max-tokens", "2")
    assert code == 0, out
    store = GraphStore.open(tmp_path / "s")
    dense = store.id_map.to_dense(["a", "b", "c"])
    texts = read_texts(store, "body")
    assert [texts[i] for i in dense] == ["first paper", None, "third été paper"]
    offsets, _ids = token_arrays(store, "body")
    assert np.diff(offsets)[dense].tolist() == [2, 0, 2]
    assert store.manifest["text"]["per_field"]["body"]["empty"] == 1
    if "tables/nodes.parquet" in store.manifest["tables"]:
        assert "body" not in store.table("tables/nodes.parquet").column_names
    code, out = _ingest(str(tmp_path / "e.csv"), str(tmp_path / "t"), "--nodes",
                        str(tmp_path / "n.parquet"), "--text-column", "nope")
    assert code == 2 and "no column 'nope'" in out and not (tmp_path / "t").exists()


def test_user_tokenizer_and_info(tag_folder: Path, tmp_path: Path) -> None:
    from graphpipe.text.tokenize import train_tokenizer

    tok = train_tokenizer(["kukego sifaku other words"] * 3, vocab_size=30)
    tok.save(str(tmp_path / "tok.json"))
    code, out = _ingest(str(tag_folder), str(tmp_path / "s"), "--text",
                        str(tag_folder / "titleabs.tsv"), "--tokenizer", str(tmp_path / "tok.json"))
    assert code == 0, out
    store = GraphStore.open(tmp_path / "s")
    assert store.manifest["text"]["tokenizer"]["kind"] == "user"
    assert load_tokenizer(read_tokenizer_json(store)).to_str() == tok.to_str()
    result = CliRunner().invoke(cli, ["info", str(tmp_path / "s"), "--json"])
    import json

    text = json.loads(result.output)["text"]
    assert text["nodes_with_text"] + text["nodes_without_text"] == 300
    assert set(text["fields"]) == {"title", "abstract"}
    result = CliRunner().invoke(cli, ["validate", str(tmp_path / "s")])
    assert result.exit_code == 0, result.output


def test_pyg_data_with_text(tmp_path: Path) -> None:
    import torch
    from torch_geometric.data import Data

    from graphpipe.interop.pyg_text import write_pyg_text_store

    data = Data(x=torch.randn(4, 2), edge_index=torch.tensor([[0, 1, 2, 3], [1, 2, 3, 0]]))
    data.text = ["a b", None, b"c \xff", "   "]
    store = write_pyg_text_store(data, tmp_path / "s", vocab_size=20)
    assert read_texts(store) == ["a b", None, "c \ufffd", None]
    per = store.manifest["text"]["per_field"]["text"]
    assert (per["invalid_utf8"], per["empty"], per["missing"]) == (1, 1, 1)
    data.text = ["a"] * 3
    with pytest.raises(ValueError, match="3 entries, the graph 4 nodes"):
        write_pyg_text_store(data, tmp_path / "t")
    data.text = ["a", 2, "b", "c"]
    with pytest.raises(ValueError, match=r"Data.text\[1\] is int"):
        write_pyg_text_store(data, tmp_path / "t")
    assert not (tmp_path / "t").exists()


def test_text_options_are_refused_for_typed_datasets(tmp_path: Path) -> None:
    from graphpipe.synthetic.mag import mag_dataset, write_ogb_mag

    data = mag_dataset(60, 80, 5, 10, 3, 8, seed=0)
    write_ogb_mag(tmp_path / "mag", data)
    (tmp_path / "t.tsv").write_text("1\ta\tb\n")
    code, out = _ingest(str(tmp_path / "mag"), str(tmp_path / "s"), "--text",
                        str(tmp_path / "t.tsv"))
    assert code == 2 and "not supported for a typed" in out and not (tmp_path / "s").exists()
