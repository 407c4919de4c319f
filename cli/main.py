"""Entry point of the `graphpipe` command: a click group whose subcommands live one per module.

Each subcommand module (``graphpipe.cli.<name>``) defines a click command named
``command``; they are imported lazily so `graphpipe --help` stays fast.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys

import click

# subcommand name -> module under graphpipe.cli
SUBCOMMANDS = {
    "centrality": "centrality",
    "derive": "derive",
    "embed": "embed",
    "demo": "demo",
    "export": "export",
    "generate": "generate",
    "ingest": "ingest",
    "info": "info",
    "partition": "partition",
    "serve": "serve",
    "split": "split",
    "train": "train",
    "validate": "validate",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(name for name, module in SUBCOMMANDS.items()
                      if importlib.util.find_spec(f"graphpipe.cli.{module}") is not None)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        module = SUBCOMMANDS.get(name)
        if module is None or importlib.util.find_spec(f"graphpipe.cli.{module}") is None:
            return None
        return importlib.import_module(f"graphpipe.cli.{module}").command


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="graphpipe")
@click.option("--debug", is_flag=True, help="Show the full traceback of an error instead of one "
              "line (also GRAPHPIPE_DEBUG=1).")
def cli(debug: bool) -> None:
    """graphpipe: graph datasets as a columnar store, and fast loaders for training.

    Exit codes: 0 done, 2 bad input (one line naming the file or field), 1 an internal
    error (re-run with --debug for the traceback), 130 interrupted.
    """
    if debug:
        os.environ["GRAPHPIPE_DEBUG"] = "1"


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the exit code (errors print one line and exit non-zero). A
    process of its own (``argv`` None) that was interrupted, or that is a ``torchrun`` rank,
    ends at once after flushing (:func:`graphpipe.interrupt.end_process`): finalization
    would run Zarr's unfinished writes or tear down gloo's threads after the last line."""
    from graphpipe import interrupt

    interrupt.install()  # Ctrl-C is remembered, so nothing is committed after it
    args = sys.argv[1:] if argv is None else argv
    if args and not {"-h", "--help", "--version"} & set(args):
        from graphpipe.jit_notice import announce_compilation

        announce_compilation()  # one stderr line when the Numba kernels compile (first run)
    code = _run(args if argv is not None else None)
    if argv is None and (code == 130 or _is_torchrun_rank()):
        interrupt.end_process(code)
    return code


def _run(argv: list[str] | None) -> int:
    """The command's exit code: click's, or the one of its error."""
    try:  # not standalone: a Ctrl-C outside a command (parsing, importing it) is ours too
        code = cli.main(args=argv, prog_name="graphpipe", standalone_mode=False)
    except (KeyboardInterrupt, click.exceptions.Abort):
        click.echo("error: interrupted; nothing was written", err=True)
        return 130
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except SystemExit as exc:
        return int(exc.code or 0)
    return code if isinstance(code, int) else 0


def _is_torchrun_rank() -> bool:
    """Whether this process ran as one rank of a process group (torchrun's variables set
    and ``torch.distributed`` used)."""
    if "torch.distributed" not in sys.modules:
        return False
    from graphpipe.train.distributed import launched_by_torchrun

    return launched_by_torchrun()


if __name__ == "__main__":
    sys.exit(main())
