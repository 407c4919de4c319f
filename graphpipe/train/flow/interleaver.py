"""The Bubble Interleaver (UniTG, thesis §5.8): the LM's fine-tuning steps run in the GNN
pipeline's bubbles.

- :class:`BubbleGate`: open while the stage driver waits for a message (its bubble),
  closed while it computes (:class:`~.stage.StageDriver` opens and closes it). It counts
  the time it was open.
- :class:`LMWorker`: a thread that runs the LM's steps (the Lazy Tuner's batches,
  ``lm_epochs`` passes) and **pauses** at every LM layer, forward and backward (hooks on
  the encoder layers and the exits), whenever the gate is closed: the pause-and-resume
  of the thesis, with a thread and an event instead of processes and signals [R]. It
  holds ``step_lock`` during a step, so the Modality Collaborator encodes between steps
  (:meth:`LMWorker.between_steps`, which opens the gate while it waits).
- [R] The LM is one process's (stage 0's, where the GNN's input lives), not
  data-parallel over the stages: the stages' bubbles fall at different times, so a
  gradient all-reduce between bubble-gated LM replicas would wait for the other stage's
  bubble at every step (the thesis' "a single-GPU LM is also supported").

>>> gate = BubbleGate()
>>> gate.open(); gate.wait(0.01), gate.is_open
(True, True)
>>> gate.close(); gate.wait(0.01), gate.is_open
(False, False)
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

import torch

__all__ = ["BubbleGate", "LMWorker"]


class BubbleGate:
    """Open during the stage's bubbles (module docstring)."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._opened_at: float | None = None
        self.open_seconds = 0.0
        self.stopped = False

    @property
    def is_open(self) -> bool:
        return self._event.is_set()

    def open(self) -> None:
        if not self._event.is_set():
            self._opened_at = time.perf_counter()
            self._event.set()

    def close(self) -> None:
        if self._event.is_set() and not self.stopped:
            self._event.clear()
            self.open_seconds += time.perf_counter() - (self._opened_at or time.perf_counter())

    def release(self) -> None:
        """Open for good (the run is over: paused work may finish or stop)."""
        self.stopped = True
        self._event.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the gate is open; whether it is."""
        return self._event.wait(timeout)


class LMWorker(threading.Thread):
    """Runs ``lm`` (an :class:`~graphpipe.train.text.lm_trainer.LMTrainer`) for
    ``epochs`` passes of its batch plan, gated by ``gate`` (module docstring).

    ``start_step``: the steps of the plan already taken (a resumed run), skipped.

    Attributes: ``steps`` (taken by this thread), ``planned`` (all passes'), ``busy_seconds`` (inside steps,
    pauses included), ``cpu_seconds`` (the thread's CPU time in steps), ``error`` (an exception that ended the thread, re-raised by
    :meth:`stop`)."""

    def __init__(self, lm: Any, gate: BubbleGate, epochs: int):
        super().__init__(name="lm-bubbles", daemon=True)
        self.lm, self.gate, self.epochs = lm, gate, epochs
        self.step_lock = threading.Lock()
        self.steps, self.planned = 0, epochs * len(lm.loader)
        self.start_step = 0
        self.busy_seconds = self.cpu_seconds = 0.0
        self.error: BaseException | None = None
        self._stopping = False
        self._hooks = [m.register_forward_pre_hook(self._pause_forward) for m in self._layers()]
        self._hooks += [m.register_forward_hook(self._pause_backward) for m in self._layers()]

    def _layers(self) -> list[torch.nn.Module]:
        model = self.lm.model
        return [*model.encoder.layers, *model.exits]

    def _pause(self) -> None:
        if threading.current_thread() is self:
            self.gate.wait()

    def _pause_forward(self, module: Any, args: Any) -> None:
        self._pause()

    def _pause_backward(self, module: Any, args: Any, output: Any) -> None:
        out = output[0] if isinstance(output, tuple) else output
        if threading.current_thread() is self and isinstance(out, torch.Tensor) and out.requires_grad:
            out.register_hook(lambda grad: (self.gate.wait(), grad)[1])

    def run(self) -> None:
        try:
            per_epoch = len(self.lm.loader)
            for epoch in range(self.start_step // per_epoch if per_epoch else 0, self.epochs):
                self.lm.loader.set_epoch(epoch)
                for k, (group, nodes) in enumerate(self.lm.loader.plan()):
                    if self._stopping:
                        return
                    if epoch * per_epoch + k < self.start_step:
                        continue
                    self.gate.wait()
                    with self.step_lock:
                        t0, c0 = time.perf_counter(), time.thread_time()
                        self.lm.lm_step(int(group), nodes)
                        self.busy_seconds += time.perf_counter() - t0
                        self.cpu_seconds += time.thread_time() - c0
                        self.steps += 1
        except Exception as exc:  # noqa: BLE001 (handed to the driver thread by stop())
            self.error = exc

    @contextlib.contextmanager
    def between_steps(self) -> Iterator[None]:
        """Hold the LM between two steps (the gate is open while waiting for it)."""
        self.gate.open()
        try:
            self.step_lock.acquire()
        finally:
            self.gate.close()
        try:
            yield
        finally:
            self.step_lock.release()

    def stop(self) -> None:
        """End the thread at its next step boundary (or pause point) and wait for it."""
        self._stopping = True
        self.gate.release()
        self.join()
        for hook in self._hooks:
            hook.remove()
        if self.error is not None:
            raise self.error
