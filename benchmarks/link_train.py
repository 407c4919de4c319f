"""Link prediction on the generated link dataset: the GNN link predictor against the
common-neighbours heuristic (and an MLP encoder on features alone), OGB's Evaluator.

For each seed: ``graphpipe generate link`` (ogbl-collab layout: Hits@50 against shared
negative pairs; with ``--citation2`` also the ogbl-citation2 layout: MRR against 100
negatives per edge), ingest, then a ``LinkTrainer`` (encoder sage / mlp, MLP decoder, the
test metric at the best valid epoch) and the heuristic on the same splits.

    python benchmarks/link_train.py --seeds 0 1 2 --epochs 10 --citation2 --write
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))


def run(style: str, seed: int, encoders: list[str], epochs: int, nodes: int) -> dict[str, float]:
    import torch

    from graphpipe.ingest import ingest
    from graphpipe.synthetic.link import link_dataset, write_ogb_link
    from graphpipe.train.link import LinkPredictor, LinkTrainer

    with tempfile.TemporaryDirectory() as tmp:
        folder = write_ogb_link(Path(tmp) / "f", link_dataset(nodes, seed=seed), style=style, seed=seed)
        store = ingest(folder, Path(tmp) / "s")
        row: dict[str, float] = {}
        for encoder in encoders:
            t0 = time.perf_counter()
            torch.manual_seed(seed)
            model = LinkPredictor(encoder, store.feature_dim, 64, 2)
            trainer = LinkTrainer(model, store, epochs=epochs, seed=seed, quiet=True)
            result = trainer.fit()
            heuristic = trainer.heuristic()
            row[encoder] = result.test_acc
            row[f"{encoder} s"] = time.perf_counter() - t0
            row["common neighbours"] = heuristic["test"]
            row["metric"] = trainer.metric
            print(f"{style} seed {seed} {encoder}: test {trainer.metric} {result.test_acc:.4f} "
                  f"(best valid {result.best_valid_acc:.4f} at epoch {result.best_epoch}); common "
                  f"neighbours {heuristic['test']:.4f}; {row[f'{encoder} s']:.0f} s", flush=True)
        return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--nodes", type=int, default=4000)
    ap.add_argument("--citation2", action="store_true", help="also the ogbl-citation2 layout (MRR)")
    ap.add_argument("--write", action="store_true", help="write benchmarks/results/link_train.md")
    args = ap.parse_args()
    from _measure import machine_note

    note = machine_note()
    styles = {"collab": ["sage", "mlp"], **({"citation2": ["sage"]} if args.citation2 else {})}
    rows = {style: [run(style, s, enc, args.epochs, args.nodes) for s in args.seeds]
            for style, enc in styles.items()}
    lines = ["# Link prediction: GNN link predictor vs common neighbours\n",
             (f"Command: `python benchmarks/link_train.py --seeds {' '.join(map(str, args.seeds))} "
             f"--epochs {args.epochs} --nodes {args.nodes}{' --citation2' if args.citation2 else ''}`\n"),
             f"{note}\n", "| layout | metric | model | test per seed | mean |", "| --- | --- | --- | --- | --- |"]
    for style, results in rows.items():
        for model in [*styles[style], "common neighbours"]:
            values = [r[model] for r in results]
            lines.append(f"| {style} | {results[0]['metric']} | "
                         f"{model if model == 'common neighbours' else model + ' encoder + MLP decoder'} | "
                         f"{', '.join(f'{v:.4f}' for v in values)} | {statistics.mean(values):.4f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.write:
        (ROOT / "benchmarks" / "results" / "link_train.md").write_text(text)


if __name__ == "__main__":
    main()
