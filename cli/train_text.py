"""`graphpipe train STORE --model lm|unitg|tape|glem`: language models on a store's node
text, alone or with a GNN (issue 26; :mod:`graphpipe.train.text`).

- ``lm``: the LM alone, a classification head on mean-pooled tokens (``--epochs`` LM
  epochs);
- ``unitg``: LM (Lazy Tuner: exits by degree-centrality group, ``--grouping``) and GNN
  (Modality Collaborator) in one job, ``--epochs`` GNN epochs, ``--lm-epochs`` LM epochs;
- ``tape``: the LM first, then a GNN on its embeddings; ``glem``: ``--glem-rounds``
  alternating rounds with pseudo-labels.

The LM is built from a config (``--lm bert|deberta``, ``--lm-hidden``, ``--lm-layers``,
random init) or read from ``--lm-path`` (a local folder, safetensors only); nothing is
downloaded. Ends with ``test acc <value>`` (the GNN's, or the LM's for ``lm``).
"""

from __future__ import annotations

import time
from typing import Any

import click
from graphpipe.cli._common import fail

TEXT_MODEL_NAMES = ("lm", "unitg", "tape", "glem")
TEXT_OPTIONS = ("lm", "lm_path", "lm_hidden", "lm_layers", "lm_heads", "max_len", "lm_epochs",
                "lm_lr", "lm_batch_size", "emb_dim", "grouping", "exit_order", "lm_share",
                "glem_rounds", "gnn")
"""The options of `graphpipe train` only the text models take."""


def text_train_options(fn):
    """The text-model options of `graphpipe train` (they arrive in ``**kwargs``)."""
    options = [
        click.option("--lm", type=click.Choice(["bert", "deberta"]), default="bert",
                     show_default=True, help="Text models: the LM's architecture (random init)."),
        click.option("--lm-path", type=click.Path(file_okay=False), default=None,
                     help="Text models: a local LM folder (config.json + model.safetensors)."),
        click.option("--lm-hidden", type=click.IntRange(8), default=128, show_default=True),
        click.option("--lm-layers", type=click.IntRange(1), default=4, show_default=True),
        click.option("--lm-heads", type=click.IntRange(1), default=2, show_default=True),
        click.option("--max-len", type=click.IntRange(4), default=64, show_default=True,
                     help="Text models: tokens per node ([CLS] fields [SEP] included)."),
        click.option("--lm-epochs", type=click.IntRange(1), default=3, show_default=True,
                     help="unitg/tape/glem: LM fine-tuning epochs."),
        click.option("--lm-lr", type=float, default=5e-4, show_default=True),
        click.option("--lm-batch-size", type=click.IntRange(1), default=32, show_default=True),
        click.option("--emb-dim", type=click.IntRange(1), default=64, show_default=True,
                     help="Text models: LM embedding width (the GNN's input)."),
        click.option("--grouping", type=click.Choice(["quartile", "equal-width"]),
                     default="quartile", show_default=True,
                     help="unitg: degree-centrality groups (equal-frequency or equal-width)."),
        click.option("--exit-order", type=click.Choice(["descending", "shuffled"]),
                     default="descending", show_default=True,
                     help="unitg: LM batches per epoch from C4 down to C1, or shuffled."),
        click.option("--lm-share", type=click.FloatRange(0, 1, min_open=True), default=0.6,
                     show_default=True,
                     help="unitg: the LM's epochs are spread over this share of GNN epochs."),
        click.option("--glem-rounds", type=click.IntRange(1), default=1, show_default=True,
                     help="glem: EM rounds after the pre-training (LM, then a GNN on its "
                          "embeddings)."),
        click.option("--gnn", type=click.Choice(["sage", "gcn"]), default="sage",
                     show_default=True, help="unitg/tape/glem: the GNN."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def text_config(params: dict[str, Any]) -> Any:
    """The :class:`~graphpipe.train.text.build.TextConfig` of the command's parameters."""
    from graphpipe.train.text.build import TextConfig

    text = {k: params[k] for k in TEXT_OPTIONS}
    shared = {k: params[k] for k in ("hidden", "layers", "lr", "dropout")}
    if text["lm_path"] is not None:
        from graphpipe.train.text.lm import check_lm_folder

        check_lm_folder(text["lm_path"])
    lm_only = params["model_name"] == "lm"
    return TextConfig(
        lm_kind=text["lm"], lm_path=text["lm_path"], lm_hidden=text["lm_hidden"],
        lm_layers=text["lm_layers"], lm_heads=text["lm_heads"], max_len=text["max_len"],
        lm_epochs=params["epochs"] if lm_only else text["lm_epochs"], lm_lr=text["lm_lr"],
        lm_batch_size=text["lm_batch_size"], emb_dim=text["emb_dim"], gnn=text["gnn"],
        gnn_hidden=shared.get("hidden") or 128, gnn_layers=shared.get("layers") or 2,
        gnn_lr=shared.get("lr") or 0.01,
        dropout=0.3 if shared.get("dropout") is None else shared["dropout"],
        epochs=params["epochs"], grouping=text["grouping"], exit_order=text["exit_order"],
        lm_share=text["lm_share"], glem_rounds=text["glem_rounds"], seed=params["seed"],
        device=params["device"])


def run(params: dict[str, Any]) -> None:
    """The text mode of `graphpipe train` (``params``: the command's parameters)."""
    from graphpipe.store import GraphStore
    from graphpipe.train.text.task import TextTask

    model_name, quiet = params["model_name"], params["quiet"]
    checkpoint, resume = params["checkpoint"], params["resume"]
    if model_name in ("tape", "glem") and (checkpoint or resume):
        fail(f"--checkpoint/--resume: --model {model_name} runs several phases; not supported")
    config = text_config(params)
    task = TextTask.from_store(GraphStore.open(params["store"]), config.max_len)
    if not quiet:
        click.echo(f"{params['store']}: {len(task.labels)} nodes, {len(task.indices)} edges, "
                   f"{int(task.has_text.sum())} with text, {task.num_classes} classes; model "
                   f"{model_name} (LM {config.lm_kind} {config.lm_layers}x{config.lm_hidden}, "
                   f"GNN {config.gnn} {config.gnn_layers}x{config.gnn_hidden})")
    started = time.perf_counter()
    test_acc, phases = _run(model_name, task, config, patience=params["patience"],
                            checkpoint=checkpoint, resume=resume,
                            metrics_log=params["metrics_log"], quiet=quiet)
    if not quiet:
        click.echo(f"wall {time.perf_counter() - started:.2f} s" + "".join(
            f"  {k} {v:.2f} s" for k, v in phases.items()))
    click.echo(f"test acc {test_acc:.4f}")


def _run(model_name: str, task: Any, config: Any, **kwargs: Any) -> tuple[float, dict[str, float]]:
    from graphpipe.train.text.baselines import run_glem, run_tape
    from graphpipe.train.text.build import build_lm_trainer, build_unitg

    resume = kwargs.pop("resume")
    if model_name in ("lm", "unitg"):
        build = build_lm_trainer if model_name == "lm" else build_unitg
        trainer = build(task, config, **kwargs)
        if resume is not None:
            trainer.check_resume(resume)
        return trainer.fit(resume=resume).test_acc, {}
    run = run_tape if model_name == "tape" else run_glem
    out = run(task, config, quiet=kwargs["quiet"])
    return out["result"].test_acc, {k: v for k, v in out["seconds"].items() if k != "total"}
