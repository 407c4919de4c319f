"""`graphpipe export` of a typed store: GraphBolt's typed layout, which ingest reads back as
the same typed store."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import yaml
from click.testing import CliRunner
from graphpipe.cli.main import cli

from graphpipe.ingest import ingest
from graphpipe.synthetic.mag import mag_dataset, write_ogb_mag


def test_typed_store_exports_and_ingests_back(tmp_path: Path) -> None:
    folder = write_ogb_mag(tmp_path / "mag", mag_dataset(papers=40, authors=20, institutions=3,
                                                         fields=5, num_classes=3, feature_dim=4))
    store = ingest(folder, tmp_path / "store")
    result = CliRunner().invoke(cli, ["export", str(tmp_path / "store"), str(tmp_path / "gb")])
    assert result.exit_code == 0, result.output
    meta = yaml.safe_load((tmp_path / "gb" / "metadata.yaml").read_text())
    assert [n["type"] for n in meta["graph"]["nodes"]] == store.node_types
    assert [e["type"] for e in meta["graph"]["edges"]] == [":".join(e) for e in store.edge_types]
    back = ingest(tmp_path / "gb", tmp_path / "back")
    assert back.num_nodes_dict == store.num_nodes_dict and back.target_type == "paper"
    assert np.array_equal(back.typed_features("paper"), store.typed_features("paper"))
