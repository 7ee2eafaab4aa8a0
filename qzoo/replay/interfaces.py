"""The two halves of a replay, as a contributor implements them (typing.Protocol: any
class with these methods is one). Samplers address slots as (row, column) of a ring of
rows written in lockstep by N environments, so every storage organised that way (frames
once each, compressed groups, tensors on a device, a dataset on disk, sequences) works
with every sampler (uniform, prioritized, on a device, one checkpoint per batch)."""

from typing import Any, Protocol

from qzoo.replay.batch import Batch, Row, SequenceBatch


class Storage(Protocol):
    """How transitions live, as samplers and batches read them (a dataset on disk is
    only this; `WritableStorage` is one that actors add rows to)."""

    num_rows: int
    num_envs: int
    num_adds: int

    @property
    def size(self) -> int:
        """Transitions stored (rows times environments)."""
        ...

    def can_sample(self) -> bool: ...

    def oldest(self) -> int:
        """The oldest row still stored (samplers count ages from it)."""
        ...

    def window(self) -> tuple[int, int]:
        """(low, high): the rows at ages low..high-1 after `oldest()` have the history
        and the future a transition needs; samplers draw rows from that window."""
        ...

    def in_window(self, t: Any) -> Any:
        """Whether rows `t` lie in `window()` (the prioritized samplers' check)."""
        ...

    def can_start(self, t: Any, b: Any) -> Any:
        """Whether rows `t` of columns `b` may start a transition at all (the
        prioritized samplers give the others no priority)."""
        ...

    def valid(self, t: Any, b: Any) -> Any:
        """Whether transitions start at rows `t` of columns `b`."""
        ...

    def gather(self, t: Any, b: Any) -> Batch | SequenceBatch:
        """The batch of transitions (sequences: replay/sequences.py) starting at rows `t`
        of columns `b`."""
        ...

    def state_dict(self) -> dict: ...

    def load_state_dict(self, state: dict) -> None: ...


class WritableStorage(Storage, Protocol):
    """A storage that actors add rows to."""

    def add(self, row: Row) -> int:
        """Writes one row of every environment; returns the row index written."""
        ...


class Sampler(Protocol):
    """Which slots a batch holds."""

    def added(self, t: int) -> None:
        """Called after the storage wrote row `t`."""
        ...

    def sample(self, batch_size: int) -> tuple[Any, Any, Any]:
        """Rows, columns and importance weights (None: uniform) of a batch."""
        ...

    def update(self, indices: Any, priorities: Any) -> None:
        """New priorities for the sampled slots `indices` (ignored by uniform ones)."""
        ...

    def state_dict(self) -> dict: ...

    def load_state_dict(self, state: dict) -> None: ...
