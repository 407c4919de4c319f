"""`graphpipe serve STORE`: the sampling / ID-map service over Arrow Flight.

Prints ``serving STORE on grpc://HOST:PORT`` on stdout once listening (``--port 0``
picks a free port), logs one line per call on stderr, and on SIGTERM/SIGINT drains
the calls in flight and exits 0.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import sys

import click
from graphpipe.cli._common import fail, friendly_errors


@click.command("serve")
@click.argument("store", type=click.Path(path_type=str))
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind (loopback by default; 0.0.0.0 exposes the service).")
@click.option("--port", default=8815, show_default=True, type=click.IntRange(0, 65535),
              help="Port to bind; 0 picks a free one (printed on stdout).")
@click.option("--token-file", type=click.Path(exists=True, dir_okay=False, path_type=str),
              help="File holding a bearer token; calls without it are refused.")
@click.option("--threads", type=click.IntRange(1), default=None,
              help="Sampling worker threads shared by all calls [default: CPU count].")
@click.option("--max-seeds", type=click.IntRange(1), default=1 << 18, show_default=True,
              help="Most seeds in one sample request batch.")
@click.option("--max-rows", type=click.IntRange(1), default=1 << 22, show_default=True,
              help="Most IDs in one lookup / reverse_lookup / features request batch.")
@click.option("--max-response-bytes", type=click.IntRange(1), default=1 << 30, show_default=True,
              help="Most bytes in one response record batch (one sampled batch, or one features batch).")
@click.option("--shared-memory-mib", type=click.IntRange(0), default=2048, show_default=True,
              help="Most MiB of shared-memory arenas handed to clients on this host, all together "
                   "(their sampled batches then skip the network copies); 0: none.")
@click.option("--drain-timeout", type=click.FloatRange(0), default=60.0, show_default=True,
              help="Seconds to wait for calls in flight after SIGTERM.")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]), default="info",
              show_default=True)
@friendly_errors
def command(store: str, host: str, port: int, token_file: str | None, threads: int | None,
            max_seeds: int, max_rows: int, max_response_bytes: int, shared_memory_mib: int,
            drain_timeout: float, log_level: str) -> None:
    """Serve STORE (sample, lookup, reverse_lookup, features, info, health) over Arrow Flight."""
    from graphpipe.allocator import tune_allocator
    from graphpipe.service.server import SamplingServer, serve_until_signalled

    tune_allocator()  # a dedicated process: reuse freed response memory (GRAPHPIPE_TUNE_MALLOC=0: off)

    logging.basicConfig(level=getattr(logging, log_level.upper()), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    token = None
    if token_file is not None:
        with open(token_file, encoding="utf-8") as fh:
            token = fh.read().strip()
        if not token:
            fail(f"--token-file {token_file!r} is empty")
    try:
        literal = ipaddress.ip_address(host)
        url_host = f"[{host}]" if literal.version == 6 else host
    except ValueError:
        url_host = host
    server = SamplingServer(store, f"grpc://{url_host}:{port}", token=token, threads=threads,
                            max_seeds=max_seeds, max_rows=max_rows, max_response_bytes=max_response_bytes,
                            shared_memory_bytes=shared_memory_mib << 20)

    def announce() -> None:
        click.echo(f"serving {store} on grpc://{url_host}:{server.port}")
        sys.stdout.flush()

    drained = serve_until_signalled(server, drain_timeout=drain_timeout, ready=announce)
    if not drained or not server.closed:  # calls still open: do not wait for them in teardown
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0 if drained else 1)
    sys.exit(0)


if __name__ == "__main__":
    command()
