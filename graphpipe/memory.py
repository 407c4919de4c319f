"""The memory this process may use: free RAM bounded by its memory cgroup's limit.

:func:`usable_memory` returns ``min(available RAM, limit - working set)`` over the
process's own memory cgroup and every ancestor of it that sets a limit, reading
cgroup v2 (``memory.max``, ``memory.current``) or cgroup v1
(``memory.limit_in_bytes``, ``memory.usage_in_bytes``) from the mount points listed in
``/proc/self/mountinfo``. A cgroup's working set is its usage less its inactive file
pages (``memory.stat`` ``inactive_file`` / ``total_inactive_file``): page cache the
kernel reclaims before it kills anyone, the figure ``docker stats`` reports.

Under ``memlimit.sh 1G`` (or a container limit) ``psutil`` still reports the host's free
memory; this function reports what is left under the cap, so ``in_memory="auto"``, the
loader's row cache and ``graphpipe train`` pick the disk tier instead of an OOM kill.
Anything unreadable (no cgroup fs, no permission) counts as "no limit".

``GRAPHPIPE_MEMORY_LIMIT=SIZE`` (``512M``, ``2G``, bytes) is a limit on this process too,
as if its cgroup set it: the room it leaves is ``SIZE`` less the process's resident set.
A scheduler that enforces its limits by watching (Slurm without cgroups) can pass them
this way, and tests use it to try every plan on any machine.

A command that cannot run in what is left refuses up front (:func:`require`, a
:class:`NotEnoughMemory`, one line and exit 2) instead of being killed by the kernel
half-way.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

__all__ = ["LIMIT_ENV", "NotEnoughMemory", "cgroup_headroom", "cgroup_limit", "env_limit",
           "format_size", "require", "usable_memory"]

_UNLIMITED = 1 << 62  # v1 reports "no limit" as a huge page-aligned number
LIMIT_ENV = "GRAPHPIPE_MEMORY_LIMIT"
"""A memory limit on this process given in the environment (see the module docstring)."""
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


class NotEnoughMemory(ValueError):
    """A command needs more memory than this process may use (exit 2, one line)."""

    exit_code = 2


def env_limit() -> int | None:
    """Bytes of ``GRAPHPIPE_MEMORY_LIMIT`` (``512M``, ``1.5G``, ``1GiB``, bytes; IEC units),
    None when unset. A value that is not a size is refused in one line.

    >>> import os
    >>> os.environ[LIMIT_ENV] = "1.5G"; env_limit() == 3 << 29
    True
    >>> del os.environ[LIMIT_ENV]; env_limit() is None
    True
    """
    text = os.environ.get(LIMIT_ENV, "").strip()
    if not text:
        return None
    match = re.fullmatch(r"([0-9]*\.?[0-9]+)\s*([KMGT]?)(I?B)?", text.upper())
    value = float(match.group(1)) * _UNITS[match.group(2)] if match else 0.0
    if not value >= 1:
        raise ValueError(f"{LIMIT_ENV} must be a size such as 512M or 2G (got {text!r})")
    return int(value)


def _read_int(path: Path) -> int | None:
    """The integer in ``path`` (``max`` -> None), None when unreadable."""
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    if text == "max":
        return None
    try:
        return int(text)
    except ValueError:
        return None


def _inactive_file(folder: Path, v2: bool) -> int:
    """Inactive page-cache bytes charged to the cgroup at ``folder`` (0 when unknown)."""
    key = "inactive_file" if v2 else "total_inactive_file"
    try:
        for line in (folder / "memory.stat").read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    except (OSError, ValueError):
        pass
    return 0


def _memory_cgroup_dirs(proc: Path = Path("/proc/self")) -> list[tuple[Path, bool]]:
    """``(folder, is_v2)`` for the process's memory cgroup and its ancestors, innermost first."""
    try:
        groups = (proc / "cgroup").read_text().splitlines()
        mounts = (proc / "mountinfo").read_text().splitlines()
    except OSError:
        return []
    v1_path = v2_path = None
    for line in groups:
        _hid, controllers, path = line.split(":", 2)
        if controllers == "":
            v2_path = path
        elif "memory" in controllers.split(","):
            v1_path = path
    for line in mounts:
        pre, _, post = line.partition(" - ")
        fields, post_fields = pre.split(), post.split()
        if len(fields) < 5 or len(post_fields) < 3:
            continue
        root, mount, fstype, options = fields[3], fields[4], post_fields[0], post_fields[2]
        if fstype == "cgroup" and v1_path is not None and "memory" in options.split(","):
            return _walk(Path(mount), root, v1_path, False)
        if fstype == "cgroup2" and v2_path is not None and v1_path is None:
            return _walk(Path(mount), root, v2_path, True)
    return []


def _walk(mount: Path, root: str, path: str, v2: bool) -> list[tuple[Path, bool]]:
    """The folders from ``path`` (a cgroup path, relative to the mount's ``root``) up to the mount."""
    rel = os.path.relpath(path, root) if path.startswith(root) else path.lstrip("/")
    parts = [] if rel in (".", "") else [p for p in rel.split("/") if p and p != ".."]
    return [(mount.joinpath(*parts[:i]), v2) for i in range(len(parts), -1, -1)]


def cgroup_headroom(proc: Path = Path("/proc/self")) -> int | None:
    """Bytes the process's memory cgroups still allow (``limit - working set``, the
    smallest over the cgroup and its ancestors, and ``GRAPHPIPE_MEMORY_LIMIT`` less the
    resident set), or None when nothing sets a limit."""
    best: int | None = _env_headroom()
    for folder, v2 in _memory_cgroup_dirs(proc):
        limit = _read_int(folder / ("memory.max" if v2 else "memory.limit_in_bytes"))
        usage = _read_int(folder / ("memory.current" if v2 else "memory.usage_in_bytes"))
        if limit is None or limit >= _UNLIMITED or usage is None:
            continue
        room = max(0, limit - max(0, usage - _inactive_file(folder, v2)))
        best = room if best is None else min(best, room)
    return best


def _env_headroom() -> int | None:
    """``GRAPHPIPE_MEMORY_LIMIT`` less this process's resident set, None when unset."""
    limit = env_limit()
    if limit is None:
        return None
    import psutil

    return max(0, limit - int(psutil.Process().memory_info().rss))


def cgroup_limit(proc: Path = Path("/proc/self")) -> int | None:
    """The smallest memory limit in bytes set on the process's cgroup or an ancestor of
    it (``memory.max`` / ``memory.limit_in_bytes``) or by ``GRAPHPIPE_MEMORY_LIMIT``,
    or None when none sets one.

    >>> limit = cgroup_limit()
    >>> limit is None or limit > 0
    True
    """
    best: int | None = env_limit()
    for folder, v2 in _memory_cgroup_dirs(proc):
        limit = _read_int(folder / ("memory.max" if v2 else "memory.limit_in_bytes"))
        if limit is not None and limit < _UNLIMITED:
            best = limit if best is None else min(best, limit)
    return best


def usable_memory() -> int:
    """Bytes this process may still allocate: ``min(available RAM, cgroup headroom)``."""
    import psutil

    available = int(psutil.virtual_memory().available)
    headroom = cgroup_headroom()
    return available if headroom is None else min(available, headroom)


def format_size(n: int) -> str:
    """``n`` bytes for a person: ``512 MB``, ``1.5 GB`` (binary units).

    >>> format_size(3 << 29), format_size(200 << 20)
    ('1.5 GB', '200 MB')
    """
    value = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit != "GB" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"


def require(need: int, what: str, usable: int | None = None) -> None:
    """Refuse up front when ``what`` (``"graphpipe train"``...) needs ``need`` bytes more
    than this process holds now and may not take them: raises :class:`NotEnoughMemory`
    naming the need, what is left and the limit. ``usable``: default :func:`usable_memory`.

    >>> require(1 << 20, "a small step", usable=1 << 30)
    >>> require(1 << 30, "training", usable=200 << 20)
    Traceback (most recent call last):
    ...
    graphpipe.memory.NotEnoughMemory: training needs about 1.0 GB of memory more than it holds now, but this process may use 200 MB more...
    """
    usable = usable_memory() if usable is None else usable
    if usable >= need:
        return
    limit = cgroup_limit()
    where = "" if limit is None else \
        f" (memory limit {format_size(limit)}{' from ' + LIMIT_ENV if limit == env_limit() else ''})"
    raise NotEnoughMemory(f"{what} needs about {format_size(need)} of memory more than it holds "
                          f"now, but this process may use {format_size(usable)} more{where}; "
                          "raise the limit or free memory")
