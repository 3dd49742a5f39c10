"""A sidecar's slots: how many runs train at once on one machine, and what each run is given.

`py-trainer serve --slots N` (default: one slot per visible GPU, 1 without CUDA). A run takes one
slot per rank (`runtime.num_processes`), or every slot when it has more ranks than the sidecar has
slots (its ranks then share them, as a multi-rank run on a 1-slot sidecar always did). The queue
admits runs in order as slots free: the head of the queue waits for its slots, nothing overtakes it.

What a run's worker gets for its slots (`SlotPool.env`):
- GPU: ``CUDA_VISIBLE_DEVICES`` = the devices of its slots (slot i is the i-th visible device, or
  device i mod the device count when there are more slots than devices);
- CPU: ``OMP_NUM_THREADS`` / ``MKL_NUM_THREADS`` = its share of the cores, cores // slots per slot,
  split over its ranks (at least 1). The cores are $OMP_NUM_THREADS of the sidecar when set, else
  the CPUs this process may run on.
"""

from __future__ import annotations

from py_trainer.core.devices import cpu_cores, visible_gpus


class SlotPool:
    """`count` slots, numbered 0..count-1; on GPU slot i maps to `gpus[i % len(gpus)]`."""

    def __init__(self, count: int | None = None, *, gpus: list[str] | None = None, cores: int | None = None):
        self.gpus = visible_gpus() if gpus is None else gpus
        self.count = count if count else max(1, len(self.gpus))
        self.cores = cores if cores is not None else cpu_cores()
        self.free: set[int] = set(range(self.count))

    def needed(self, ranks: int) -> int:
        """Slots a run with `ranks` ranks takes."""
        return min(max(1, ranks), self.count)

    def take(self, ranks: int) -> list[int] | None:
        """The lowest free slots for a run with `ranks` ranks, or None while too few are free."""
        n = self.needed(ranks)
        if len(self.free) < n:
            return None
        got = sorted(self.free)[:n]
        self.free.difference_update(got)
        return got

    def give_back(self, slots: list[int]) -> None:
        self.free.update(s for s in slots if 0 <= s < self.count)

    def claim(self, slots: list[int]) -> None:
        """Mark `slots` held (a run a restarted sidecar reattached to)."""
        self.free.difference_update(slots)

    def env(self, slots: list[int], ranks: int) -> dict[str, str]:
        """The environment a run's worker gets for its slots."""
        if self.gpus:
            return {"CUDA_VISIBLE_DEVICES": ",".join(self.gpus[s % len(self.gpus)] for s in slots)}
        threads = str(self.threads(slots, ranks))
        return {"OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads}

    def threads(self, slots: list[int], ranks: int) -> int:
        """CPU threads for each rank of a run holding `slots`."""
        return max(1, (self.cores // self.count) * len(slots) // max(1, ranks))

    def describe(self, slots: list[int], ranks: int) -> str:
        """For the sidecar's log: 'slots [0] (OMP_NUM_THREADS=1)'."""
        given = " ".join(f"{k}={v}" for k, v in self.env(slots, ranks).items() if k != "MKL_NUM_THREADS")
        return f"slots {slots} ({given})"
