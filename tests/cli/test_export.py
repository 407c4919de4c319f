"""`graphpipe export` of a typed store: one line saying graphbolt export takes homogeneous stores."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner
from graphpipe.cli.main import cli

from graphpipe.ingest import ingest
from graphpipe.synthetic.mag import mag_dataset, write_ogb_mag


def test_typed_store_export_is_refused_in_one_line(tmp_path: Path) -> None:
    folder = write_ogb_mag(tmp_path / "mag", mag_dataset(papers=40, authors=20, institutions=3,
                                                         fields=5, num_classes=3, feature_dim=4))
    ingest(folder, tmp_path / "store")
    result = CliRunner().invoke(cli, ["export", str(tmp_path / "store"), str(tmp_path / "gb")])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "typed store" in lines[0] and "homogeneous stores only" in lines[0]
    assert not (tmp_path / "gb").exists()
