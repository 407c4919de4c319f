"""`graphpipe info STORE`: counts, degree summary, sizes, splits, provenance (table or --json);
a typed store: a table of node types and one of relations."""

from __future__ import annotations

import json
from typing import Any

import click
from graphpipe.cli._common import friendly_errors, human_bytes


@click.command("info")
@click.argument("store", type=click.Path(path_type=str))
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@friendly_errors
def command(store: str, as_json: bool) -> None:
    """Describe STORE."""
    from graphpipe.store import open_store
    from graphpipe.store.summary import summarize

    info = summarize(open_store(store))
    if as_json:
        click.echo(json.dumps(info, indent=2))
        return
    if "node_types" in info:  # a typed store: one row per node type and relation
        _print_typed(info)
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"graphpipe store {info['name']}", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    deg = info["in_degree"]
    rows = [
        ("path", info["path"]),
        ("nodes", f"{info['num_nodes']:,}"),
        ("edges", f"{info['num_edges']:,}"),
        ("in-degree", f"min {deg['min']}  median {deg['median']:g}  mean {deg['mean']:.2f}  max {deg['max']}"),
        ("degree quantiles", "  ".join(f"{k} {v:g}" for k, v in deg["quantiles"].items())),
        ("topology", ", ".join(f"{k}={v}" for k, v in info["graph"].items())),
        ("node features", _describe(info["node_features"])),
        ("edge features", _describe(info["edge_features"])),
        ("labels", _describe(info["labels"])),
        ("timestamps", ", ".join(f"{k} {v.get('min')}..{v.get('max')}" for k, v in
                                 (info.get("time") or {}).items()) or "none"),
        ("splits", ", ".join(f"{k} {v:,}" for k, v in info["splits"].items()) or "none"),
        ("link splits", ", ".join(
            f"{k} {v['num_pos']:,}" + (f" (+{v['num_neg']:,} neg)" if "num_neg" in v else "")
            + (f" (x{v['neg_per_pos']} neg)" if "neg_per_pos" in v else "")
            for k, v in (info.get("link_splits") or {}).items()) or "none"),
        ("id map", _describe(info["id_map"])),
        ("size on disk", human_bytes(info["total_bytes"])),
    ]
    rows += [(f"  {key}", human_bytes(size)) for key, size in info["sizes_bytes"].items()]
    rows += [("provenance", ", ".join(f"{k}={v}" for k, v in info["provenance"].items()))]
    if info["derived"]:
        rows += [("derived", ", ".join(info["derived"]))]
    rows += _text_rows(info.get("text"))
    for key, value in rows:
        table.add_row(key, str(value))
    Console().print(table)


def _text_rows(text: dict | None) -> list[tuple[str, str]]:
    """The node-text rows: nodes with text, then tokens per node of each field."""
    if not text:
        return [("text", "none")]
    head = (f"{text['nodes_with_text']:,} nodes with text, {text['nodes_without_text']:,} "
            f"without; tokenizer {text['tokenizer']}")
    rows = [("text", head)]
    for name, f in text["fields"].items():
        tok = f["tokens"]
        line = (f"{f['with_text']:,} nodes; tokens/node mean {tok.get('mean', 0)} p50 "
                f"{tok.get('p50', 0):g} p90 {tok.get('p90', 0):g} max {tok.get('max', 0)}; "
                f"empty {f['empty']}, invalid UTF-8 {f['invalid_utf8']}, cut {f['truncated']}, "
                f"at max tokens {tok['at_max_tokens']}")
        rows.append((f"  text {name}", line))
    return rows


def _describe(meta: dict | None) -> str:
    if not meta:
        return "none"
    return ", ".join(f"{k}={v}" for k, v in meta.items())


def _features(meta: dict | None) -> str:
    return "none" if not meta else f"{meta['dim']} x {meta['dtype']}"


def _print_typed(info: dict[str, Any]) -> None:
    """A typed store: a table of node types, one of relations, then sizes."""
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
