"""Resample counts: how often each unit is drawn, block by block, and drawn ahead in a child.

A bootstrap resample of ``n`` units draws ``n`` of them uniformly with replacement; what the
statistics need is each unit's count. Counts come in fixed blocks of :data:`BLOCK` resamples,
block ``i`` drawn from ``PCG64(SeedSequence([seed, i]))``: any block can be drawn on its own,
in any order, by any thread or process, and the integers are the same.

Drawing is half the bootstrap's work (10^8 draws at 10,000 cases and 10,000 resamples, about
0.5 s of CPU). ``ragproof compare`` spends its first second reading the artifacts, work that
holds the interpreter lock on one core, so it has a child process draw the counts meanwhile on
the other (:func:`draw_ahead`). The child writes them, two units a byte, into memory shared
with the parent, which unpacks each block when the bootstrap reaches it
(:meth:`DrawnAhead.fill`) -- the same integers it would have drawn itself.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import signal
import threading

import numpy as np

BLOCK = 64  # resamples per independent random stream
# Counts a byte holds: two units of 4 bits. A unit drawn 16 times or more in one resample
# (probability about 1e-14 a cell at any n) makes the child give up: the bootstrap then draws.
PACKED_MAX = 15
_LOW_BITS = 0x0F  # the low unit of a packed byte
# Drawing ahead pays from about this many cells (0.08 s of draws); smaller bootstraps draw at once.
AHEAD_MIN_CELLS = 1 << 24
# The shared memory at most (resamples x units / 2 bytes): 50 MB at 10,000 x 10,000.
AHEAD_MAX_BYTES = 64 << 20


def _rng(seed: int, block: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed % (1 << 64), block])))


def block_counts(seed: int, block: int, out: np.ndarray) -> None:
    """Fill ``out`` (rows x units, C-contiguous) with one block's resample counts: how often
    each unit was drawn.

    Counted with one unbuffered add of ones at the flat positions ``row * units + draw``
    (``np.add.at``'s same-dtype path), which releases the GIL, unlike ``np.bincount``: the
    worker threads count in parallel instead of taking turns (the same integers either way).
    """
    rows, units = out.shape
    if not out.flags.c_contiguous:
        raise ValueError("the counts block must be C-contiguous")
    # One generator per block and one call, so 32-bit draws (buffered in pairs) stay reproducible.
    dtype = np.uint32 if units <= np.iinfo(np.uint32).max else np.int64
    draws = _rng(seed, block).integers(0, units, size=(rows, units), dtype=dtype)
    flat = draws.astype(np.intp)
    del draws
    flat += np.arange(0, rows * units, units, dtype=np.intp)[:, None]
    out.fill(0)
    np.add.at(out.reshape(-1), flat.reshape(-1), out.dtype.type(1))


def _draw_packed(seed: int, n_units: int, resamples: int, packed: np.ndarray) -> bool:
    """Every block's counts into ``packed`` (resamples x ceil(n/2) bytes): unit ``2k`` in the
    low 4 bits of byte ``k``, unit ``2k + 1`` in the high ones. False when a count exceeds
    :data:`PACKED_MAX` (nothing usable then)."""
    counts = np.empty((BLOCK, n_units), dtype=np.uint8)
    odd = n_units // 2
    for block in range(-(-resamples // BLOCK)):
        first = block * BLOCK
        rows = min(BLOCK, resamples - first)
        drawn = counts[:rows]
        block_counts(seed, block, drawn)
        if int(drawn.max()) > PACKED_MAX:
            return False
        target = packed[first : first + rows]
        target[:] = drawn[:, 0::2]
        target[:, :odd] |= drawn[:, 1::2] << 4
    return True


class DrawnAhead:
    """The resample counts of ``(seed, n_units, resamples)``, drawn by a child process.

    The child starts at construction (``os.fork``: call it before the process starts any
    thread, so that the child holds no lock another thread had) and ends by itself.
    :meth:`fill` waits for it once; if it failed, gave up or was killed, ``fill`` answers False
    and the caller draws the block itself. :meth:`close` ends the child and frees the memory.
    """

    def __init__(self, seed: int, n_units: int, resamples: int) -> None:
        self.key = (seed, n_units, resamples)
        width = -(-n_units // 2)
        self._memory: mmap.mmap | None = mmap.mmap(-1, max(1, resamples * width))  # shared, anonymous
        self._packed = np.frombuffer(self._memory, dtype=np.uint8, count=resamples * width).reshape(
            resamples, width
        )
        self._lock = threading.Lock()
        self._ready: bool | None = None
        self._pid = os.fork()
        if self._pid == 0:  # the child: draw, then leave without running the parent's exit code
            code = 1
            try:
                code = 0 if _draw_packed(seed, n_units, resamples, self._packed) else 2
            finally:
                os._exit(code)

    def matches(self, seed: int, n_units: int, resamples: int) -> bool:
        return self.key == (seed, n_units, resamples)

    def _wait(self) -> bool:
        with self._lock:
            if self._ready is None:
                try:
                    _, status = os.waitpid(self._pid, 0)
                    self._ready = status == 0
                except ChildProcessError:
                    self._ready = False
            return self._ready

    def fill(self, first_row: int, out: np.ndarray) -> bool:
        """Write the counts of resamples ``first_row ..`` into ``out`` (rows x units, any
        numeric dtype); False (``out`` untouched) when the child's counts are not usable."""
        if not self._wait():
            return False
        rows, n_units = out.shape
        packed = self._packed[first_row : first_row + rows]
        out[:, 0::2] = packed & _LOW_BITS
        out[:, 1::2] = packed[:, : n_units // 2] >> 4
        return True

    def close(self) -> None:
        """End the child if it still runs, reap it, and unmap the counts (once)."""
        with self._lock:
            if self._memory is None:
                return
            if self._ready is None:
                with contextlib.suppress(ProcessLookupError, ChildProcessError):
                    os.kill(self._pid, signal.SIGKILL)
                    os.waitpid(self._pid, 0)
            self._ready = False
            del self._packed
            # A view still alive keeps it mapped until the process ends.
            with contextlib.suppress(BufferError):
                self._memory.close()
            self._memory = None


def draw_ahead(seed: int, n_units: int, resamples: int) -> DrawnAhead | None:
    """A child drawing the counts of a bootstrap to come, or None where that does not pay
    (under :data:`AHEAD_MIN_CELLS` cells), would hold more than :data:`AHEAD_MAX_BYTES`, or
    the system cannot fork."""
    cells = n_units * resamples
    if cells < AHEAD_MIN_CELLS or -(-n_units // 2) * resamples > AHEAD_MAX_BYTES:
        return None
    try:
        return DrawnAhead(seed, n_units, resamples)
    except (OSError, AttributeError):  # no fork here, or no memory to share
        return None
