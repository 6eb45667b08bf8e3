"""Property-based tests of transactions: random interleavings of two open transactions (either
isolation level) that read and read-then-write keys of two tables, with blind upserts beside
them, against a model that predicts which commits are refused: under snapshot isolation those
that wrote a key changed since their snapshot, under serializable also those that read one
(read-only ones included, which never commit a version). Every committed state must read back
exactly as the model says; a refused commit changes nothing. Values only grow, so a change is
never undone by a later one (no ABA)."""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field

import pyarrow as pa
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import castable

SCHEMA = pa.schema([("id", pa.int64()), ("value", pa.int64())])
TABLES = ("a", "b")
KEYS = 4
slots = st.integers(0, 1)
cells = st.tuples(st.sampled_from(TABLES), st.integers(0, KEYS - 1))


@dataclass
class Open:
    """A transaction in progress and what the model expects of it."""

    tx: castable.Transaction
    isolation: str
    snapshot: int
    reads: set[tuple[str, int]] = field(default_factory=set)
    writes: dict[tuple[str, int], int] = field(default_factory=dict)


class DatabaseModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = tempfile.mkdtemp(prefix="castable-txmodel-")
        self.values: dict[tuple[str, int], int] = {}
        self.changed: dict[tuple[str, int], int] = {}
        """The model version that last changed each key."""
        self.version = 0
        self.fresh = 1_000_000
        self.open: dict[int, Open] = {}
        self.history: list[dict[tuple[str, int], int]] = []

    @initialize()
    def create(self) -> None:
        self.db = castable.create_database(f"{self.root}/db")
        for name in TABLES:
            self.db.create_table(name, SCHEMA, primary_key="id").append(
                pa.table({"id": list(range(KEYS)), "value": [0] * KEYS}, schema=SCHEMA)
            )
            self.values |= {(name, k): 0 for k in range(KEYS)}
        self.changed = dict.fromkeys(self.values, 0)
        self.history = [dict(self.values)]
        """The model's state at each of its versions (0: the tables as created)."""

    def _seen(self, slot: int, cell: tuple[str, int]) -> int:
        """What the transaction in ``slot`` reads for ``cell``: its own write, or its snapshot's value."""
        t = self.open[slot]
        return t.writes.get(cell, self._at(cell, t.snapshot))

    def _at(self, cell: tuple[str, int], version: int) -> int:
        return self.history[version][cell]

    @precondition(lambda self: len(self.open) < 2)
    @rule(slot=slots, serializable=st.booleans())
    def begin(self, slot: int, serializable: bool) -> None:
        if slot in self.open:
            return
        isolation = "serializable" if serializable else "snapshot"
        tx = self.db.transaction(isolation=isolation).begin()  # type: ignore[arg-type]
        self.open[slot] = Open(tx, isolation, self.version)

    @precondition(lambda self: bool(self.open))
    @rule(slot=slots, cell=cells)
    def read(self, slot: int, cell: tuple[str, int]) -> None:
        if slot not in self.open:
            return
        t = self.open[slot]
        got = t.tx.table(cell[0]).scan(["value"], f"id = {cell[1]}").to_arrow().column("value").to_pylist()
        assert got == [self._seen(slot, cell)]
        t.reads.add(cell)

    @precondition(lambda self: bool(self.open))
    @rule(slot=slots, cell=cells, delta=st.integers(1, 5))
    def read_then_write(self, slot: int, cell: tuple[str, int], delta: int) -> None:
        if slot not in self.open:
            return
        self.read(slot, cell)
        t = self.open[slot]
        value = self._seen(slot, cell) + delta
        t.tx.table(cell[0]).upsert(pa.table({"id": [cell[1]], "value": [value]}, schema=SCHEMA))
        t.writes[cell] = value

    @rule(cell=cells)
    def blind_upsert(self, cell: tuple[str, int]) -> None:
        self.fresh += 1
        self.db.table(cell[0]).upsert(pa.table({"id": [cell[1]], "value": [self.fresh]}, schema=SCHEMA))
        self._apply({cell: self.fresh})

    def _apply(self, writes: dict[tuple[str, int], int]) -> None:
        self.version += 1
        self.values |= writes
        self.changed |= dict.fromkeys(writes, self.version)
        self.history.append(dict(self.values))

    @precondition(lambda self: bool(self.open))
    @rule(slot=slots)
    def commit(self, slot: int) -> None:
        if slot not in self.open:
            return
        t = self.open.pop(slot)
        judged = set(t.writes) | (t.reads if t.isolation == "serializable" else set())
        refused = any(self.changed[cell] > t.snapshot for cell in judged)
        before = self.db.refresh().version
        try:
            t.tx.commit()
        except castable.CommitConflictError:
            assert refused, f"refused, though nothing it {t.isolation}-depends on changed"
            assert self.db.refresh().version == before
            return
        assert not refused, f"committed over a change to {sorted(c for c in judged if self.changed[c] > t.snapshot)}"
        if t.writes:
            self._apply(t.writes)
        else:
            assert self.db.refresh().version == before, "a read-only transaction commits no version"

    @precondition(lambda self: bool(self.open))
    @rule(slot=slots)
    def abort(self, slot: int) -> None:
        if slot in self.open:
            self.open.pop(slot).tx.abort()

    @invariant()
    def latest_matches(self) -> None:
        if not hasattr(self, "db"):
            return
        snap = self.db.refresh().snapshot()
        got = {(name, r["id"]): r["value"] for name in TABLES for r in snap.table(name).to_arrow().to_pylist()}
        assert got == self.values

    def teardown(self) -> None:
        for t in self.open.values():
            t.tx.abort()
        shutil.rmtree(self.root, ignore_errors=True)


DatabaseModel.TestCase.settings = settings(
    max_examples=25, stateful_step_count=25, deadline=None, suppress_health_check=list(HealthCheck)
)
TestDatabaseModel = DatabaseModel.TestCase
