"""Fair turns for writers of one log (docs/format.md section 7, fairness).

A writer that keeps losing the race for the next version cannot make the winner see it: the
winner reads nothing that changes. So, for a table whose property ``commit.fair-turns`` is
true (the default), a writer that has lost ``JOIN_AFTER_LOSSES`` times in a row joins a line
kept in the pointer, and a writer that sees a line joins it at once. Only the line's first
writer attempts; each of the others watches for the version that shows the writers ahead of
it have committed, the second following the first a request after it lands. A commit that
lands leaves the line in the same write that advances the pointer. The line is
ordered by when each commit began, so the longest wait is bounded by the line's length.

A line is advice: a writer that does not know of it yet may still win a round, and the first
writer's turn lasts ``PATIENCE_SECONDS`` in any one process, after which that process takes it
out of the line (its writer may have crashed).
"""

from __future__ import annotations

import logging
import random
import statistics
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from functools import partial

from castable.commit.pointer import LINE_LIMIT, Pointer, Turn, put_pointer, read_pointer
from castable.errors import CorruptObjectError, TableNotFoundError
from castable.store import ConcurrentModificationError, ObjectStore, PreconditionFailedError, StoreError

log = logging.getLogger(__name__)

JOIN_AFTER_LOSSES = 2
"""A writer that has lost this many attempts in a row joins the line."""
PATIENCE_SECONDS = 2.0
"""How long a process waits on one writer's turn before it takes that writer out of the line."""
POLL_MIN_SECONDS = 0.005
PEEKS_PER_POINTER_READ = 4
"""A writer in line reads the pointer once for this many requests it makes while waiting."""
UPDATE_ATTEMPTS = 8
"""Compare-and-swap attempts to change the line: each one lost means another writer moved the
pointer, so the writers as a whole progress."""


class _Patience:
    """When this process first waited on each writer's turn (shared by all its commits)."""

    KEEP = 256

    def __init__(self) -> None:
        self._first: dict[str, float] = {}
        self._lock = threading.Lock()

    def exhausted(self, writer: str) -> bool:
        with self._lock:
            first = self._first.setdefault(writer, time.monotonic())
            if len(self._first) > self.KEEP:  # forget the oldest half: long-gone writers
                for old in sorted(self._first, key=self._first.__getitem__)[: self.KEEP // 2]:
                    del self._first[old]
            return time.monotonic() - first > PATIENCE_SECONDS


_patience = _Patience()


class _RoundTrips:
    """The typical time of one pointer read in this process: the median of the latest few, so
    that one slow response does not stretch every writer's wait."""

    KEEP = 15

    def __init__(self) -> None:
        self._latest: deque[float] = deque(maxlen=self.KEEP)
        self._lock = threading.Lock()

    def add(self, seconds: float) -> None:
        """Record one round trip."""
        with self._lock:
            self._latest.append(seconds)

    def typical(self) -> float:
        """The median of the latest round trips (0 before the first)."""
        with self._lock:
            return statistics.median(self._latest) if self._latest else 0.0


_round_trips = _RoundTrips()


class Place:
    """One commit's place in the line of the log whose pointer is in ``store``."""

    def __init__(self, store: ObjectStore) -> None:
        self.store = store
        self.me = Turn(time.time(), uuid.uuid4().hex)
        self.known: Pointer | None = None
        """The newest pointer seen."""
        self.waited = 0.0
        """Seconds spent waiting for a turn (not attempt time, for the backoff's estimate)."""
        self.gone: set[str] = set()
        """Writers seen to have taken their turn since the newest pointer seen was read."""
        self.unsure = False
        """A change of the line ended ambiguously: it may hold this commit unknown to it."""

    def saw(self, pointer: Pointer | None) -> None:
        """Hear of a pointer just read or written. A new one forgets which writers were seen to
        have taken their turn: its line is the one to judge by."""
        if pointer is not None and pointer is not self.known:
            self.known = pointer
            self.gone.clear()

    @property
    def line(self) -> tuple[Turn, ...]:
        """The line as the newest pointer seen holds it."""
        return () if self.known is None else tuple(t for t in self.known.line if t.writer not in self.gone)

    @property
    def first(self) -> bool:
        """Whether this commit is first in line: it attempts again at once after a loss."""
        return bool(self.line) and self.line[0] == self.me

    @property
    def queued(self) -> bool:
        return self.me in self.line

    def wait_turn(self, peek: Callable[[int], bool]) -> Pointer | None:
        """Wait while there is a line and this commit is not first in it, joining it if it is
        not in it; the newest pointer read, if any. A writer ``k`` places behind the first
        (or outside a full line of ``k``) watches with ``peek`` for the entry ``k`` versions
        after the newest pointer it has seen (true: it exists, and the race builds on it):
        then the writers ahead have had their turns. The second asks a request at a time, so
        it follows the first a request after that lands; the others ask a typical round trip
        apart per place ahead. One request in ``PEEKS_PER_POINTER_READ`` reads the pointer
        instead, since the line can move without a commit."""
        newest: Pointer | None = None
        requests = 0
        while self.line and not self.first:
            started = time.monotonic()
            requests += 1
            if _patience.exhausted(self.line[0].writer):
                first = self.line[0]
                taken_out = self._update(partial(_first_is, first), _but_first)
                if taken_out is None:  # the pointer could not be changed: wait on that writer no more
                    self.gone.add(first.writer)
                newest = taken_out or newest
            elif not self.queued and len(self.line) < LINE_LIMIT:  # join, however often the pointer moves meanwhile
                newest = self.join() or newest
            elif requests % PEEKS_PER_POINTER_READ != 0:
                ahead = self.line.index(self.me) if self.queued else len(self.line)
                if self._peek(peek, ahead):
                    self.gone.update(t.writer for t in self.line[:ahead])
                else:
                    self._pause(ahead - 1)
            else:
                looked = time.monotonic()
                try:
                    newest = read_pointer(self.store)
                except (StoreError, CorruptObjectError, TableNotFoundError):
                    return newest
                self.saw(newest)
                _round_trips.add(time.monotonic() - looked)
            self.waited += time.monotonic() - started
        return newest

    def _pause(self, round_trips: int) -> None:
        """Sleep about ``round_trips`` typical pointer round trips, jittered: at least
        ``POLL_MIN_SECONDS`` (a log that cannot peek answers at once), and never so long that
        this commit's own turn would outlast the others' patience."""
        poll = random.uniform(0.5, 1.5) * _round_trips.typical() * round_trips
        time.sleep(min(max(poll, POLL_MIN_SECONDS), PATIENCE_SECONDS / 4))

    def _peek(self, peek: Callable[[int], bool], ahead: int) -> bool:
        assert self.known is not None
        after = self.known.version + ahead - 1
        try:
            return peek(after)
        except (StoreError, CorruptObjectError) as e:
            log.info("could not look for the entry after version %d of %s: %s", after, self.store.uri, e)
            return False

    def join(self) -> Pointer | None:
        """Take a place in line (unless the line is full); the pointer written or read."""
        return self._update(
            lambda p: self.me not in p.line and len(p.line) < LINE_LIMIT, lambda p: tuple(sorted((*p.line, self.me)))
        )

    def leave(self) -> Pointer | None:
        """Leave the line: a commit that gives up, or landed without leaving it."""
        return self._update(lambda p: self.me in p.line, lambda p: p.without(self.me.writer))

    def _update(self, when: Callable[[Pointer], bool], line: Callable[[Pointer], tuple[Turn, ...]]) -> Pointer | None:
        """Change the line by compare-and-swap if the pointer satisfies ``when``: first the
        pointer in hand, then, if that was stale or did not satisfy ``when``, the pointer read
        again. The pointer as it ends, or ``None`` if it could not be read. Best effort:
        whoever wins the race for the pointer instead has left a line to honour."""
        current = self.known if self.known is not None and self.known.etag else None
        fresh = current is None
        for _ in range(UPDATE_ATTEMPTS):
            try:
                if current is None:
                    current, fresh = read_pointer(self.store), True
                if current.etag and when(current):
                    current = put_pointer(self.store, current, line=line(current))
                elif not fresh:  # judge the pointer as it is now
                    current = None
                    continue
            except (PreconditionFailedError, ConcurrentModificationError):
                current = None
                continue
            except (StoreError, CorruptObjectError, TableNotFoundError) as e:
                log.info("could not change the line of %s: %s", self.store.uri, e)
                self.unsure = True
                return None
            self.saw(current)
            return current
        return None


def _first_is(turn: Turn, pointer: Pointer) -> bool:
    return pointer.line[:1] == (turn,)


def _but_first(pointer: Pointer) -> tuple[Turn, ...]:
    return pointer.line[1:]
