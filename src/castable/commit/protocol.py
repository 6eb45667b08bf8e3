"""The commit protocol (docs/format.md section 7).

- The commit point is the ``If-None-Match: *`` PUT of ``manifest/v<N+1>``: exactly one writer
  creates each version, so versions are dense and time travel to version K is one GET.
- ``_latest_manifest`` is an accelerator, moved forward only, by compare-and-swap (If-Match).
  Whoever finds it behind rolls it forward; it is never moved backwards.
- A writer that loses the race loads the *newest* committed version (pointer, then probe
  forward), lets its change re-validate and rebuild on top of it (rebase), and tries again
  after a jittered backoff scaled to how long one attempt takes on this store. However far
  behind a writer starts, one lost attempt brings it to the head, so it never falls behind.
  Attempts are bounded in time (``commit.timeout-seconds``), not in count.
- Every commit carries a ``commit_id``. A retried commit whose id is already in the table's
  recent history returns that version, and after an ambiguous failure the writer reads the
  version it tried and recognises its own commit.
"""

from __future__ import annotations

import logging
import random
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

from tenacity import RetryCallState, RetryError, Retrying, retry_if_exception_type, stop_after_delay

from castable.commit.change import Change, CommitResult, stage
from castable.commit.log import newest_manifest, read_manifest
from castable.commit.pointer import Pointer, advance_pointer, read_pointer
from castable.commit.turns import JOIN_AFTER_LOSSES, Place
from castable.errors import (
    CommitConflictError,
    CommitStateUnknownError,
    CorruptObjectError,
    TableNotFoundError,
    VersionNotFoundError,
)
from castable.format.layout import manifest_key
from castable.format.manifest import Manifest
from castable.store import (
    ConcurrentModificationError,
    ObjectNotFoundError,
    ObjectStore,
    PreconditionFailedError,
    StoreError,
)

log = logging.getLogger(__name__)

BACKOFF_GROWTH_LIMIT = 3
"""A loser waits up to 2**n attempt-times after its (n+1)-th loss in a row, n capped here (8x)."""
BACKOFF_AGING_AFTER = 8
"""After this many losses in a row a writer waits at most one attempt-time: it has waited long
enough, and the writer that just won (whose next commit does not wait) must not keep winning."""
CATCH_UP_JUMP_EVERY = 3
"""A table writer reads the pointer to catch up after its first loss and every this many losses
in a row after it, else the next version (see ``TableRace.catch_up``)."""
BACKOFF_MIN_SECONDS = 0.001
BACKOFF_MAX_SECONDS = 5.0


class Lost(Exception):
    """An attempt lost (or did not land): the race waits, loads the newest entry and tries again."""


R = TypeVar("R")
C = TypeVar("C")


class Race(ABC, Generic[C, R]):
    """One commit's attempts on a log, a table's or a database's: the ``If-None-Match: *`` PUT
    of the next entry is the commit point. A lost attempt waits out a :func:`backoff` first and
    only then loads the newest entry and builds on it (a base loaded before the wait would be
    stale by the time it is used, and lose again to whoever committed meanwhile). Attempts are
    bounded by ``timeout`` seconds; then ``CommitConflictError``, with nothing committed.

    A subclass says how to load the newest entry, recognise a commit that landed before, build
    a candidate (``C``), recognise its own entry after an ambiguous PUT, and finish a landed
    commit (``R``)."""

    def __init__(
        self, store: ObjectStore, *, commit_id: str, operation: str, timeout: float, fair: bool = True
    ) -> None:
        self.store = store
        self.fair = fair
        """Whether this commit joins and honours the line of waiting writers."""
        self.commit_id = commit_id
        self.operation = operation
        self.timeout = timeout
        self.behind = False
        """A lost attempt left the entry in hand stale: the next attempt loads the newest first."""
        self.lost_segments: list[str] = []
        """Segments of an attempt that lost with a 412, deleted once the next attempt knows it did
        not land after all (a 412 can also answer a retried PUT of one's own)."""
        self.pointer: Pointer | None = None
        """The newest pointer this race has read or written (see :meth:`saw`)."""
        self.place = Place(store)
        """This commit's place in the line of writers waiting for a turn (``castable.commit.turns``)."""
        self.lost = 0
        """Attempts lost in a row."""
        self.taken = 0
        """The newest version this race lost the race for: committed by another writer."""

    @property
    @abstractmethod
    def known_version(self) -> int:
        """The newest entry's version this race builds on."""

    @abstractmethod
    def catch_up(self) -> None:
        """Load the newest committed entry (and roll forward what needs it)."""

    @abstractmethod
    def committed_before(self) -> R | None:
        """The result of this ``commit_id`` if the newest entry shows it landed already."""

    @abstractmethod
    def candidate(self, created: list[str]) -> tuple[str, bytes, C]:
        """The next entry's key, bytes and staged form; segments written go to ``created``."""

    @abstractmethod
    def owns(self, key: str, data: bytes) -> bool:
        """Whether the entry at ``key`` (read after an ambiguous PUT) is this commit's."""

    @abstractmethod
    def finish(self, staged: C) -> R:
        """Finish a commit whose entry is written (move pointers, roll forward)."""

    @abstractmethod
    def changes(self) -> Iterable[Change]:
        """The changes this commit applies (their uploads are out before the commit point)."""

    def peek_next(self, after: int) -> bool:
        """Whether the entry after version ``after`` is committed, and if so build on it from
        now on. A log that cannot tell in one request says no: waiting then reads the pointer."""
        return False

    def saw(self, pointer: Pointer | None) -> None:
        """Hear of a pointer just read or written: the newest known, with the line to honour."""
        self.pointer = pointer
        self.place.saw(pointer)

    def run(self) -> R:
        retrying = Retrying(
            stop=stop_after_delay(self.timeout), wait=self._wait, retry=retry_if_exception_type(Lost), reraise=False
        )
        try:
            return retrying(self._attempt)
        except RetryError as e:
            if self.behind:  # the caller's handle is left at the newest version, as after any loss
                try:
                    self.catch_up()
                except (StoreError, CorruptObjectError) as error:
                    raise CommitStateUnknownError(
                        f"commit {self.commit_id} ({self.operation}) lost to concurrent writers for "
                        f"{self.timeout:g} s, and whether an attempt landed could not be checked: {error}",
                        self.commit_id,
                    ) from error
                before = self.committed_before()
                if before is not None:  # an attempt seen as lost was its own (a retried PUT answered 412)
                    return before
            raise CommitConflictError(
                f"commit {self.commit_id} ({self.operation}) lost to concurrent writers for {self.timeout:g} s "
                f"({e.last_attempt.attempt_number} attempts); nothing was committed"
            ) from None
        finally:
            if self.place.queued or self.place.unsure:  # gave up, or landed without leaving: let the others go
                self.place.leave()

    def _wait(self, state: RetryCallState) -> float:
        """A writer in line tries again at once (it waits its turn in the attempt); everyone
        else backs off."""
        return 0.0 if self.place.queued else backoff(state, idle=self.place.waited)

    def _attempt(self) -> R:
        newest = self.place.wait_turn(self.peek_next) if self.fair else None
        if newest is not None:
            self.saw(newest)
            self.behind = self.behind or newest.version > self.known_version
        if self.behind:
            self.catch_up()
            self.behind = False
        before = self.committed_before()
        if before is not None:  # a retry, or a response that was lost
            return before
        _discard(self.store, self.lost_segments)
        self.lost_segments = []
        created: list[str] = []
        key, data, staged = self.candidate(created)
        try:  # the objects the write uploads while it commits are out before anything names them
            for change in self.changes():
                if change.uploads is not None:
                    change.uploads.settle()
        except StoreError:
            _discard(self.store, created)
            raise
        try:
            self.store.put(key, data, if_none_match=True)
            return self.finish(staged)
        except PreconditionFailedError:
            self.lost_segments = created
            self.taken = max(self.taken, self.known_version + 1)
        except ConcurrentModificationError:
            pass
        except StoreError as e:
            log.warning("commit of %s to %s ended ambiguously: %s", self.commit_id, key, e)
            if holds_commit(self.store, key, self.commit_id, e, self.owns):
                return self.finish(staged)
        self.behind = True
        self.lost += 1
        if self.fair and self.lost >= JOIN_AFTER_LOSSES and not self.place.queued:
            self.saw(self.place.join() or self.pointer)
        raise Lost()


def holds_commit(
    store: ObjectStore, key: str, commit_id: str, cause: StoreError, owns: Callable[[str, bytes], bool]
) -> bool:
    """After an ambiguous PUT of ``key``: whether the object there is this commit's own (``owns``
    judges its key and bytes); ``CommitStateUnknownError`` if that cannot be read."""
    try:
        blob = store.get(key)
    except ObjectNotFoundError:
        return False
    except StoreError as e:
        raise CommitStateUnknownError(
            f"could not tell whether commit {commit_id} landed as {key}: {e}", commit_id
        ) from cause
    return owns(key, blob.data)


def backoff(retry_state: RetryCallState, idle: float = 0.0) -> float:
    """A random wait of up to 2**n times the average attempt so far (n losses in a row, capped),
    back to one attempt-time once a writer has lost ``BACKOFF_AGING_AFTER`` times.

    Scaling by the attempt time makes the same rule fit a local disk (milliseconds) and S3
    (tens of milliseconds); the jitter spreads the losers so the next round has one winner.
    """
    attempts = retry_state.attempt_number
    active = max(retry_state.seconds_since_start or 0.0, 0.0) - retry_state.idle_for - idle
    per_attempt = max(active / attempts, BACKOFF_MIN_SECONDS)
    exponent = min(attempts - 1, BACKOFF_GROWTH_LIMIT) if attempts <= BACKOFF_AGING_AFTER else 0
    window = min(per_attempt * 2**exponent, BACKOFF_MAX_SECONDS)
    return random.uniform(0, window)


def commit_to_table(
    store: ObjectStore,
    base: Manifest,
    change: Change,
    *,
    commit_id: str,
    pointer: Pointer | None = None,
    timeout: float = 120.0,
    commit_retention: int = 1000,
    on_newer_base: Callable[[Manifest, Pointer | None], None] | None = None,
    fair: bool = True,
) -> CommitResult:
    """Commit ``change`` to the table's own log, rebasing until it lands.

    ``change.build(base)`` is called again on every newer base: that is where a change re-validates
    itself against what was committed meanwhile (format section 8), and it may raise to abort.
    ``on_newer_base`` hears of every newer version the writer loads, so a handle stays current
    even when the commit then fails.
    """
    race = TableRace(
        store,
        base,
        pointer,
        change,
        commit_id=commit_id,
        timeout=timeout,
        commit_retention=commit_retention,
        on_newer_base=on_newer_base,
        fair=fair,
    )
    return race.run()


class TableRace(Race[Manifest, CommitResult]):
    """A commit to a table's own log.

    Expiry deletes old manifests, which frees their keys: a writer whose base is older than the
    retention window could create one of them again. So after each commit the writer checks
    the pointer's retention floor; a version below it is invisible to everyone, so the writer
    deletes it and commits again on the newest version.
    """

    def __init__(
        self,
        store: ObjectStore,
        base: Manifest,
        pointer: Pointer | None,
        change: Change,
        *,
        commit_id: str,
        timeout: float,
        commit_retention: int,
        on_newer_base: Callable[[Manifest, Pointer | None], None] | None,
        fair: bool = True,
    ) -> None:
        super().__init__(store, commit_id=commit_id, operation=change.operation, timeout=timeout, fair=fair)
        self.planned = base
        self.head = base
        self.change = change
        self.commit_retention = commit_retention
        self.on_newer_base = on_newer_base
        self.losses = 0
        self.saw(pointer)

    def changes(self) -> Iterable[Change]:
        return (self.change,)

    @property
    def known_version(self) -> int:
        return self.head.version

    def catch_up(self) -> None:
        """A version newer than the one lost on. The winner's next commit takes three requests
        after its winning PUT (pointer, data file, manifest); a loser that read the pointer,
        then its manifest, then PUT would need three too and start later, so it would lose
        every race while the winner keeps committing. So the loser reads the version it lost
        to directly and commits on it (two requests). Its first loss, and every third one in
        a row after it, jumps ahead through the pointer instead, so a writer however far behind
        reaches the newest version in one round, and one that fell behind while it waited
        catches up."""
        self.losses += 1
        if self.pointer is not None and self.pointer.version > self.head.version:
            try:  # the pointer read while waiting for a turn names a newer version: read it
                self._adopt(read_manifest(self.store, self.pointer.version, self.planned.table_uuid), self.pointer)
                return
            except VersionNotFoundError:  # expired since: look again
                pass
        if self.losses % CATCH_UP_JUMP_EVERY != 1:
            try:
                self._adopt(read_manifest(self.store, self.head.version + 1, self.planned.table_uuid), self.pointer)
                return
            except VersionNotFoundError:  # the 412 was not another writer's version: look again
                pass
        self._load(self.head, newer_than=self.head.version)

    def peek_next(self, after: int) -> bool:
        try:
            head = read_manifest(self.store, max(after, self.head.version, self.taken) + 1, self.planned.table_uuid)
        except VersionNotFoundError:
            return False
        self._adopt(head, self.pointer)
        self.behind = False
        return True

    def _load(self, known: Manifest | None, newer_than: int | None = None) -> None:
        """The newest version, searched from the pointer (and from ``known``, if that is ahead)."""
        self._adopt(
            *newest_manifest(self.store, known=known, table_uuid=self.planned.table_uuid, newer_than=newer_than)
        )

    def _adopt(self, head: Manifest, pointer: Pointer | None) -> None:
        """Build on ``head`` from now on, and tell the caller's handle."""
        self.head = head
        self.saw(pointer)
        if self.on_newer_base is not None:
            self.on_newer_base(head, pointer)

    def committed_before(self) -> CommitResult | None:
        version = self.head.recent_commits.get(self.commit_id)
        if version is None:
            return None
        try:
            found = read_manifest(self.store, version, self.planned.table_uuid)
        except VersionNotFoundError:  # committed long ago and expired since: the answer stands
            return CommitResult(version, self.head, self.pointer)
        return CommitResult(version, found, advance_pointer(self.store, found.version, self.pointer))

    def candidate(self, created: list[str]) -> tuple[str, bytes, Manifest]:
        staged = stage(
            self.head,
            [self.change],
            planned=self.planned,
            commit_id=self.commit_id,
            commit_retention=self.commit_retention,
        ).written(self.store, created)
        return manifest_key(staged.version), staged.to_json(), staged

    def owns(self, key: str, data: bytes) -> bool:
        found = Manifest.from_json(data, key=key, store=self.store)
        return found.table_uuid == self.planned.table_uuid and found.commit.commit_id == self.commit_id

    def finish(self, staged: Manifest) -> CommitResult:
        moved = advance_pointer(self.store, staged.version, self.pointer, leaving=self.place.me.writer) or _floor_check(
            self.store, staged, self.commit_id
        )
        self.saw(moved)
        if staged.version < moved.oldest:
            log.warning(
                "version %d landed below the retention floor %d; committing again", staged.version, moved.oldest
            )
            self.store.delete(manifest_key(staged.version))
            self._load(None)
            raise Lost()
        return CommitResult(staged.version, staged, moved)


def _discard(store: ObjectStore, segments: list[str]) -> None:
    """Delete the segments an attempt wrote once a 412 shows another writer's manifest holds its
    key: no version lists them, and none ever will (each attempt writes its own). Not after a
    409 or an ambiguous error, whose request might still land. Best effort: ``gc`` sweeps the rest."""
    if not segments:
        return
    try:
        store.delete_many(segments)
    except StoreError as e:
        log.info("could not delete %d segments of a lost commit attempt: %s", len(segments), e)


def _floor_check(store: ObjectStore, manifest: Manifest, commit_id: str) -> Pointer:
    """The pointer, read to check the retention floor after advancing it failed: a version is
    reported as committed only once it is known not to lie below the floor."""
    try:
        return read_pointer(store)
    except (StoreError, CorruptObjectError, TableNotFoundError) as e:
        raise CommitStateUnknownError(
            f"commit {commit_id} landed as version {manifest.version}, but the pointer could not be read to "
            f"check that version is visible: {e}; retry with the same commit_id",
            commit_id,
        ) from e
