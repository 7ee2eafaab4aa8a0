"""Timing a method where it is, for the benchmarks that split a step into parts
(step_parts.py, async_parts.py)."""

import time


def timed(owner, name, record, clock=time.thread_time):
    """Replaces `owner.name` by a wrapper that calls `record(seconds)` with each call's
    duration by `clock` (thread CPU time by default: steadier than wall time on a
    shared machine; the wrapper adds about half a microsecond)."""
    method = getattr(owner, name)

    def wrapper(*args, **kwargs):
        begin = clock()
        try:
            return method(*args, **kwargs)
        finally:
            record(clock() - begin)

    setattr(owner, name, wrapper)
