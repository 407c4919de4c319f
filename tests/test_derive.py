"""write_mean_features / `graphpipe derive`: the OGB-LSC baseline's author and institution
features against a NumPy reference, float16 kept, and the trainer using them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from graphpipe.cli.main import cli

from graphpipe.derive import write_mean_features
from graphpipe.ingest import ingest
from graphpipe.store import open_store
from graphpipe.store.writer import TypedStoreWriter
from graphpipe.synthetic.mag import mag_dataset, write_ogb_mag
from graphpipe.train.hetero_models import build_hetero_model
from graphpipe.train.trainer import TypedTrainer, typed_model_dims, typed_training_data

WRITES = ("author", "writes", "paper")
AFFILIATED = ("author", "affiliated_with", "institution")


@pytest.fixture(scope="module")
def mag():
    return mag_dataset(papers=400, authors=500, institutions=25, fields=40, num_classes=4,
                       feature_dim=8, seed=2)


@pytest.fixture
def mag_store(mag, tmp_path) -> Path:
    ingest(write_ogb_mag(tmp_path / "src", mag), tmp_path / "store")
    return tmp_path / "store"


def _mean_by(owner, other, x, n):
    """Reference: row i = mean of x[other] over the edges whose owner is i, summed in float64
    in (owner, other) order, cast to x's dtype; zeros without edges."""
    order = np.lexsort((other, owner))
    sums = np.zeros((n, x.shape[1]), np.float64)
    np.add.at(sums, owner[order], x[other[order]].astype(np.float64))
    deg = np.bincount(owner, minlength=n)[:, None]
    return np.divide(sums, deg, out=np.zeros_like(sums), where=deg > 0).astype(x.dtype)


def test_authors_then_institutions_equal_numpy(mag, mag_store):
    store = open_store(mag_store)
    assert store.typed_features("author") is None
    entry = write_mean_features(store, "author", "author___writes___paper", memory_bytes=4096)
    a_src, p_dst = (np.asarray(v, np.int64) for v in mag.edges[WRITES])
    paper_x = np.asarray(open_store(mag_store).typed_features("paper"))
    want_author = _mean_by(a_src, p_dst, paper_x, 500)
    got_author = np.asarray(open_store(mag_store).typed_features("author"))
    assert got_author.dtype == np.float32 and np.array_equal(got_author, want_author)
    assert entry["source_type"] == "paper" and entry["via"] == "author___writes___paper"
    # the chain: institutions from the authors' derived features (the relation's CSC side)
    write_mean_features(open_store(mag_store), "institution", AFFILIATED)
    a, i = (np.asarray(v, np.int64) for v in mag.edges[AFFILIATED])
    got = np.asarray(open_store(mag_store).typed_features("institution"))
    assert np.array_equal(got, _mean_by(i, a, want_author, 25))
    derived = open_store(mag_store).manifest["derived"]
    assert set(derived) >= {"mean_features_author", "mean_features_institution"}


def test_float16_source_stays_float16(tmp_path):
    rng = np.random.default_rng(0)
    src, dst = rng.integers(0, 50, 300), rng.integers(0, 40, 300)
    x = rng.standard_normal((40, 6)).astype(np.float16)
    with TypedStoreWriter(tmp_path / "s", {"author": 50, "paper": 40}) as w:
        w.add_relation(WRITES, src, dst)
        w.write_node_array("paper", "feat", x)
        w.commit()
    write_mean_features(open_store(tmp_path / "s"), "author", WRITES, memory_bytes=256)
    got = np.asarray(open_store(tmp_path / "s").typed_features("author"))
    assert got.dtype == np.float16
    assert np.array_equal(got, _mean_by(src, dst, x, 50))
    np.testing.assert_allclose(got.astype(np.float32), _mean_by(src, dst, x.astype(np.float32), 50),
                               rtol=2**-10, atol=2**-14)


def test_trainer_uses_the_derived_features(mag_store):
    write_mean_features(open_store(mag_store), "author", WRITES)
    write_mean_features(open_store(mag_store), "institution", AFFILIATED)
    data = typed_training_data(open_store(mag_store))
    dims = typed_model_dims(data)
    assert dims["author"] == dims["institution"] == 8 and dims["field_of_study"] is None
    torch.manual_seed(0)
    model = build_hetero_model("rgat", dims, data.num_nodes_dict, 16, 4, 2, data.edge_types,
                               "paper", heads=2)
    assert set(model.embed) == {"field_of_study"}  # no embedding where features were derived
    trainer = TypedTrainer(model, data, fanouts=[4, 4], batch_size=64, epochs=1, max_steps=2,
                           quiet=True)
    batch = next(iter(trainer.loader))
    feat = np.asarray(open_store(mag_store).typed_features("author"))
    assert np.array_equal(np.asarray(batch.x["author"]), feat[np.asarray(batch.n_id["author"])])
    assert 0.0 <= trainer.fit().test_acc <= 1.0


def test_cli_derives_and_refuses_with_one_line(mag_store):
    run = CliRunner().invoke
    result = run(cli, ["derive", str(mag_store), "--mean-features", "author",
                       "--via", "author___writes___paper"])
    assert result.exit_code == 0, result.output
    assert "author features 500 x 8 float32" in result.output
    for args, message in [
        (["--mean-features", "author", "--via", "author___writes___paper"], "already has features"),
        (["--mean-features", "institution", "--via", "author___writes___paper"], "must join"),
        (["--mean-features", "venue", "--via", "author___writes___paper"], "no node type"),
        (["--mean-features", "author", "--via", "author___cites___paper"], "no relation"),
        (["--mean-features", "institution", "--via", "paper___has_topic___field_of_study"],
         "must join"),
        (["--mean-features", "field_of_study", "--via", "paper___has_topic___field_of_study",
          "--overwrite"], None),
    ]:
        result = run(cli, ["derive", str(mag_store), *args])
        if message is None:
            assert result.exit_code == 0, result.output
            continue
        assert result.exit_code == 2 and message in result.output, result.output
        assert len(result.output.strip().splitlines()) == 1
    assert not any(p.name.startswith(".pending") for p in Path(mag_store).iterdir())


def _interrupt_after(monkeypatch, parts: int) -> None:
    """The next derive stops (as at Ctrl-C) once ``parts`` blocks are saved."""
    import graphpipe.derive as derive_mod

    save, saved = derive_mod._save_part, []

    def save_then_stop(work, r0, rows, without):
        if len(saved) == parts:
            raise KeyboardInterrupt
        save(work, r0, rows, without)
        saved.append(r0)

    monkeypatch.setattr(derive_mod, "_save_part", save_then_stop)


@pytest.mark.parametrize("ntype, via", [("author", WRITES), ("institution", AFFILIATED)])
def test_interrupted_run_leaves_the_store_alone_and_resumes(mag, mag_store, monkeypatch,
                                                            ntype, via):
    """Killed after two blocks: no features, no pending folder, the blocks kept; run again:
    it starts after them and the result is the uninterrupted one, bit for bit."""
    if ntype == "institution":  # institutions average the authors' derived features
        write_mean_features(open_store(mag_store), "author", WRITES)
    store = open_store(mag_store)
    x = np.asarray(store.typed_features("paper" if ntype == "author" else "author"))
    src, dst = (np.asarray(v, np.int64) for v in mag.edges[via])
    owner, other = (src, dst) if ntype == "author" else (dst, src)
    want = _mean_by(owner, other, x, store.num_nodes_dict[ntype])
    memory = 4 * 8 * 40  # a few output rows per pass: many blocks
    with monkeypatch.context() as m:
        _interrupt_after(m, 2)
        with pytest.raises(KeyboardInterrupt):
            write_mean_features(store, ntype, via, memory_bytes=memory)
    work = Path(mag_store) / f".derive-mean_features_{ntype}"
    parts = sorted(p.name for p in work.glob("part-*.npy"))
    assert len(parts) == 2 and open_store(mag_store).typed_features(ntype) is None
    assert not any(p.name.startswith(".pending") for p in Path(mag_store).iterdir())
    entry = write_mean_features(open_store(mag_store), ntype, via, memory_bytes=memory)
    assert entry["resumed_at_row"] == int(parts[1].split("-")[2]) > 0
    n = store.num_nodes_dict[ntype]
    assert entry["without_neighbours"] == int((np.bincount(owner, minlength=n) == 0).sum())
    assert np.array_equal(np.asarray(open_store(mag_store).typed_features(ntype)), want)
    assert not work.exists()


def test_resume_starts_afresh_when_the_inputs_changed(mag, mag_store, monkeypatch):
    """Blocks saved for other inputs (here: float32 sums) are not reused."""
    with monkeypatch.context() as m:
        _interrupt_after(m, 1)
        with pytest.raises(KeyboardInterrupt):
            write_mean_features(open_store(mag_store), "author", WRITES, memory_bytes=1024,
                                accumulate=np.float32)
    entry = write_mean_features(open_store(mag_store), "author", WRITES, memory_bytes=1024)
    assert entry["resumed_at_row"] == 0 and entry["accumulate"] == "float64"
    a_src, p_dst = (np.asarray(v, np.int64) for v in mag.edges[WRITES])
    paper_x = np.asarray(open_store(mag_store).typed_features("paper"))
    assert np.array_equal(np.asarray(open_store(mag_store).typed_features("author")),
                          _mean_by(a_src, p_dst, paper_x, 500))


def test_passes_and_bytes_read_follow_the_plan(mag, mag_store):
    """The paper features are read in sequential blocks, once per pass (a block of author
    sums), only the rows some edge of the pass names unless they are most of a block: bytes
    taken <= passes x the table, passes = the plan's."""
    from graphpipe.ops.features.neighbour_mean import plan_neighbour_mean

    paper_x = open_store(mag_store).typed_features("paper")
    table = paper_x.nbytes
    memory = 8 * 12 * 100 * 2  # 100 author sums (float64 + float32 out) per pass
    entry = write_mean_features(open_store(mag_store), "author", WRITES, memory_bytes=memory)
    assert plan_neighbour_mean(8, paper_x.dtype, memory).passes(500) == entry["passes"] == 5
    assert 0 < entry["source_bytes_gathered"] <= entry["passes"] * table
    one = write_mean_features(open_store(mag_store), "author", WRITES, replace=True)
    assert one["passes"] == 1 and one["source_bytes_gathered"] == table
