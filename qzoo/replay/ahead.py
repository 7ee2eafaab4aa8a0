"""The next batch sampled while the learner updates on this one, within the updates due
after one acting step: decoding compressed frames, or gathering a GPU learner's batch
on the host, overlaps the update.

With many environments several updates fall due after each acting step (32 with 128
environments at DQN Zoo's replay ratio), and nothing is stored between them. For
uniform sampling nothing an update does changes what the next draw gives, so drawing
batch i+1 on a thread while update i runs yields exactly the batches, in the same
order from the same random stream, that drawing them one after the other would: the
run is bit-identical. Prioritized sampling is left alone (each draw must see the
priorities the update before it wrote), and so is the first batch of each step (it
must see the row just stored). The thread is the only one touching the replay while
it samples (compressed storage is not safe for two samplers at once).
"""

from concurrent.futures import ThreadPoolExecutor


class SampleAhead:
    """`batches(n, sample)`: `n` results of `sample()`, in order, each next one made
    on a worker thread while the caller works on the one before."""

    def __init__(self):
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="qzoo-sample")

    def batches(self, n, sample):
        pending = self._pool.submit(sample)
        for i in range(n):
            batch = pending.result()
            if i + 1 < n:
                pending = self._pool.submit(sample)
            yield batch

    def close(self):
        self._pool.shutdown(wait=True)
