"""Every code block of the README and the guides (docs/guide/*.md, docs/dropin.md) runs.

Each file runs in a fresh process, in an empty temporary folder, its blocks in order as a
reader would type them: ```bash / ```sh blocks in bash (``set -euo pipefail``, this
environment's ``graphpipe`` and ``python`` first on the PATH), ```python blocks in one
Python namespace per file; what a block leaves running in the background (a server) is
stopped when the file is done. A block that cannot run here says why in an HTML comment right
above it, ``<!-- not run: REASON -->`` (an S3 bucket, several machines); a block that
needs PyG's sampler says ``<!-- needs: pyg-sampler -->``: its file is marked
``requires_pyg_sampler`` and skips with the suite's one reason where the sampler is missing.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from concurrent.futures import Future, ThreadPoolExecutor, wait
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs" / "guide").glob("*.md")), ROOT / "docs" / "dropin.md"]
FENCE = re.compile(r"^(?P<indent> {0,3})```(?P<lang>[\w+-]*)[^\n]*\n(?P<body>.*?)^(?P=indent)```[ \t]*$",
                   re.DOTALL | re.MULTILINE)
NOTE = re.compile(r"<!--\s*(not run|needs):\s*(?P<what>[^>]*?)\s*-->\s*$")
RUNNABLE = {"python": "python", "py": "python", "bash": "bash", "sh": "bash", "shell": "bash"}
#: files run this many at a time (each in its own process and folder: their interpreter
#: starts and imports overlap) ...
CONCURRENT_FILES = 2
#: ... except those that start ranks on a free loopback port, which run alone afterwards
ALONE = ("--nproc", "--seq-parallel", "torchrun")

RUNNER = r'''
import json, os, subprocess, sys, traceback
blocks = json.load(open(sys.argv[1]))
namespace = {"__name__": "__main__"}
for i, (lang, line, body) in enumerate(blocks):
    print(f"@@ block {i} ({lang}, line {line})", flush=True)
    if lang == "bash":
        proc = subprocess.run(["bash", "-euo", "pipefail", "-c", body])
        if proc.returncode:
            sys.exit(f"@@ FAILED: the {lang} block at line {line} exited {proc.returncode}")
    else:
        try:
            exec(compile(body, f"<block at line {line}>", "exec"), namespace)
        except BaseException:
            traceback.print_exc()
            sys.exit(f"@@ FAILED: the {lang} block at line {line} raised")
'''


def code_blocks(text: str) -> list[tuple[str, int, str, str | None, str | None]]:
    """``(lang, line, body, not_run_reason, needs)`` of every fenced block of ``text``."""
    out = []
    for match in FENCE.finditer(text):
        lang = RUNNABLE.get(match["lang"].lower())
        if lang is None:
            continue
        line = text.count("\n", 0, match.start()) + 1
        before = text[:match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        note = NOTE.search(before)
        not_run = note["what"] if note and note.group(1) == "not run" else None
        needs = note["what"] if note and note.group(1) == "needs" else None
        body = "\n".join(l[len(match["indent"]):] for l in match["body"].split("\n"))
        out.append((lang, line, body, not_run, needs))
    return out


def _doc_param(doc: Path):
    """``doc`` as a test parameter, marked as the tests that need PyG's sampler are
    (tests/conftest.py: one skip rule) when one of its blocks says it needs it."""
    needs = {n for *_, n in code_blocks(doc.read_text(encoding="utf-8")) if n}
    marks = [pytest.mark.requires_pyg_sampler] if "pyg-sampler" in needs else []
    return pytest.param(doc, marks=marks, id=str(doc.relative_to(ROOT)))


def _run_blocks(doc: Path, tmp_path: Path) -> tuple[int, str]:
    """Run ``doc``'s blocks as the module docstring says; ``(exit code, output's tail)``."""
    blocks = code_blocks(doc.read_text(encoding="utf-8"))
    runnable = [(lang, line, body) for lang, line, body, not_run, _ in blocks if not not_run]
    assert runnable or not blocks, f"{doc.name}: no block runs"
    (tmp_path / "blocks.json").write_text(json.dumps(runnable))
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""),
           "PYTHONPATH": str(ROOT), "GRAPHPIPE_REPO": str(ROOT)}
    work = tmp_path / "work"
    work.mkdir()
    log = tmp_path / "output.txt"  # a file, not a pipe: a server a block leaves running holds it
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-c", RUNNER, str(tmp_path / "blocks.json")],
                                cwd=work, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            code = proc.wait(timeout=1800)
        finally:
            try:  # what the blocks started in the background (a server) ends with them
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    return code, log.read_text()[-8000:]


def _alone(doc: Path) -> bool:
    return any(flag in doc.read_text(encoding="utf-8") for flag in ALONE)


@pytest.fixture(scope="module")
def doc_runs(request, tmp_path_factory) -> dict[Path, Future]:
    """The selected files, ``CONCURRENT_FILES`` at a time, started with the first of them;
    not the ones that run alone, nor those marked (their skip rule decides in their test)."""
    docs = [item.callspec.params["doc"] for item in request.session.items
            if item.path == Path(__file__) and item.originalname == "test_every_code_block_runs"
            and item.get_closest_marker("requires_pyg_sampler") is None
            and not _alone(item.callspec.params["doc"])]
    pool = ThreadPoolExecutor(max_workers=CONCURRENT_FILES)
    runs = {doc: pool.submit(_run_blocks, doc, tmp_path_factory.mktemp("doc")) for doc in docs}
    yield runs
    pool.shutdown(wait=True, cancel_futures=True)


@pytest.mark.parametrize("doc", [_doc_param(doc) for doc in DOCS])
def test_every_code_block_runs(doc: Path, doc_runs: dict[Path, Future], tmp_path: Path) -> None:
    if doc in doc_runs:
        code, output = doc_runs[doc].result()
    else:
        wait(doc_runs.values())  # what runs alone starts when the others are done
        code, output = _run_blocks(doc, tmp_path)
    assert code == 0, output


def test_the_block_parser_sees_fences_notes_and_languages() -> None:
    text = ("x\n```python\na = 1\n```\n<!-- not run: needs S3 -->\n```bash\naws s3 ls\n```\n"
            "```text\nnot code\n```\n<!-- needs: pyg-sampler -->\n```py\nb = 2\n```\n")
    blocks = code_blocks(text)
    assert [(lang, line, body) for lang, line, body, _, _ in blocks] == [
        ("python", 2, "a = 1\n"), ("bash", 6, "aws s3 ls\n"), ("python", 13, "b = 2\n")]
    assert [b[3] for b in blocks] == [None, "needs S3", None]
    assert [b[4] for b in blocks] == [None, None, "pyg-sampler"]
