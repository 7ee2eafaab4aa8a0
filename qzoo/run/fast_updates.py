"""The update bookkeeping's fast paths (run/updates.py's Updates, made faster without a
change of results): the next batch drawn ahead during an update, and the whole update
as one captured graph. Each changes only how the due updates are made; storing,
counting, target copies and checkpoints are the plain bookkeeping's."""

from typing import Any

from qzoo.run.updates import Updates


class AheadUpdates(Updates):
    """Updates whose batches, when several fall due after one acting step, are drawn
    on a thread while the update before runs (replay/ahead.py: uniform replay only, so
    the batches and the run are those of the plain bookkeeping, bit for bit)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        from qzoo.replay.ahead import SampleAhead

        self._ahead = SampleAhead()

    def learn_many(self, due: int) -> None:
        if due <= 1:
            return super().learn_many(due)
        for batch in self._ahead.batches(due, self.sample_batch):
            self.learn_once(batch=batch)
            self.target_after_update()

    def close(self) -> None:
        super().close()
        self._ahead.close()


class CapturedUpdates(Updates):
    """Updates made by `captured` (learning/captured.py's CapturedUpdate): the draw
    from a device replay, the loss, the step and the priorities in one graph call; K
    of them per call (--capture-updates) when K or more fall due."""

    def __init__(self, *args: Any, captured: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.captured = captured

    def learn_many(self, due: int) -> None:
        many = self.captured.updates
        if many <= 1:
            return super().learn_many(due)
        for n in [many] * (due // many) + [1] * (due % many):  # K at a time, then one by one
            self.learn_once(updates=n)

    def learn_once(self, lock: Any = None, batch: Any = None, updates: int = 1) -> None:
        """`updates` captured updates on batches drawn in the graph (`batch` unused)."""
        if self.importance_sampling is not None:
            self.captured.set_beta(self.beta())
        with lock or _nothing():
            self.captured.update(updates)
        self.transitions_sampled += self.batch_size * updates


def _nothing():
    import contextlib

    return contextlib.nullcontext()
