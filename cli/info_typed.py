"""`graphpipe info` of a typed store: a table of node types, one of relations, then sizes."""

from __future__ import annotations

from typing import Any

from graphpipe.cli._common import human_bytes


def _features(meta: dict | None) -> str:
    return "none" if not meta else f"{meta['dim']} x {meta['dtype']}"


def print_typed(info: dict[str, Any]) -> None:
    """Print the summary of a typed store (:func:`graphpipe.store.summary.summarize`)."""
    from rich.console import Console
    from rich.table import Table

    console = Console(width=max(Console().width, 140))  # relation names stay on one line
    console.print(f"[bold]graphpipe store {info['name']}[/bold] (typed)  {info['path']}")
    console.print(f"nodes {info['num_nodes']:,}  edges {info['num_edges']:,}  "
                  f"target type {info['target_type'] or 'none'}  "
                  f"size on disk {human_bytes(info['total_bytes'])}")
    nodes = Table(title="node types", title_justify="left")
    for column in ("type", "nodes", "features", "classes", "time", "splits"):
        nodes.add_column(column)
    for ntype, meta in info["node_types"].items():
        labels = meta["labels"] or {}
        nodes.add_row(ntype, f"{meta['num_nodes']:,}", _features(meta["features"]),
                      str(labels.get("num_classes", "-")), "yes" if meta["time"] else "-",
                      ", ".join(f"{k} {v:,}" for k, v in meta["splits"].items()) or "-")
    console.print(nodes)
    rels = Table(title="relations (src___rel___dst)", title_justify="left")
    rels.add_column("relation", no_wrap=True)
    for column in ("edges", "in-degree min/median/mean/max", "edge features", "time"):
        rels.add_column(column)
    for name, meta in info["edge_types"].items():
        deg = meta["in_degree"]
        rels.add_row(name, f"{meta['num_edges']:,}",
                     f"{deg['min']} / {deg['median']:g} / {deg['mean']:.2f} / {deg['max']}",
                     _features(meta["edge_features"]), "yes" if meta["time"] else "-")
    console.print(rels)
    console.print("provenance: " + ", ".join(f"{k}={v}" for k, v in info["provenance"].items()))
