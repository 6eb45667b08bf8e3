"""Seeded random histories of a castable table published as Iceberg after every commit, with what
strict readers stumble on: renames that reuse and swap names, names as data has them (a leading
``_``, dots, spaces, letters beyond ASCII), widenings (int to long), drops and
re-adds, inline rows, files registered without field ids, deletes, upserts, updates, compaction,
erase, purge and expiry; and the readers
that check them: Java Iceberg (Spark 3.5 with iceberg-spark-runtime, in .venv-spark35) and
pyiceberg, at every retained version and incrementally between versions."""

from __future__ import annotations

import random
import subprocess
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.table import StaticTable

import castable
from castable.format.evolution import field_id
from castable.format.layout import ICEBERG_PREFIX
from castable.iceberg import IcebergPublishError, publish

from . import ROOT

SPARK35 = ROOT / ".venv-spark35" / "bin" / "python"
READERS = ROOT / ".venv-duckdb15" / "bin" / "python"
"""The side venv with iceberg-rust (and DuckDB 1.5.5)."""
JARS = ROOT / ".tools" / "iceberg"
START = pa.schema(
    [pa.field("id", pa.int64(), nullable=False), ("a", pa.string()), ("b", pa.string()), ("n", pa.int32())]
)


SPECS: list[list[str]] = [["bucket(4, id)"], ["truncate(500, id)", "n"], []]
"""The partitionings a partitioned history moves between (``n`` is widened by an alter)."""


def register(table: castable.Table, name: str, rows: pa.Table) -> None:
    """Register ``rows`` as another writer's file: no field ids (unless ``rows``' schema carries
    them), the columns named as given; the table in a local directory."""
    key = f"data/registered/{name}.parquet"
    path = Path(table.uri.removeprefix("file://"), key)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(rows, path)
    table.add_files([key])


class History:
    """A seeded history; ``published`` are the versions published, ``appends`` those that only
    appended new keys."""

    def __init__(self, uri: str, seed: int, *, partitioned: bool = False) -> None:
        self.rng = random.Random(seed)
        self.partitioned = partitioned
        self.spec = 0
        """The index in ``SPECS`` of the partitioning new files are written with."""
        self.table = castable.create_table(
            uri,
            START,
            primary_key="id",
            partition_by=SPECS[0] if partitioned else None,
            properties={"write.inline.max-bytes": 2048},
        )
        self.next_id = 0
        self.published: list[int] = []
        self.appends: set[int] = set()
        self.renames = 0
        self.spans: list[tuple[int, int]] = []
        self.kinds: set[str] = set()
        """The kinds of step that committed, and ``refused`` if a version needed a compaction to publish."""

    def rows(self, ids: list[int]) -> pa.Table:
        """Rows with ``ids`` in the table's schema now."""
        columns: dict[str, pa.Array] = {}
        for f in self.table.schema:
            if f.name == "id":
                columns[f.name] = pa.array(ids, pa.int64())
            elif pa.types.is_integer(f.type):
                columns[f.name] = pa.array([self.rng.choice([None, self.rng.randint(0, 999)]) for _ in ids], f.type)
            else:
                columns[f.name] = pa.array([self.rng.choice([None, f"{f.name}{i}"]) for i in ids], f.type)
        return pa.table(columns, schema=pa.schema([f.remove_metadata() for f in self.table.schema]))

    def live(self, n: int) -> list[int]:
        ids = self.table.scan(["id"]).to_arrow().column("id").to_pylist()
        return self.rng.sample(ids, min(n, len(ids)))

    def step(self) -> None:
        rng, t = self.rng, self.table
        kinds = ["append"] * 6 + ["big", "register", "delete", "range", "upsert", "update", "compact", "erase", "alter"]
        kinds += ["partition"] * 2 if self.partitioned else []
        kind = rng.choice([*kinds, "purge"])
        before = t.version
        if kind in ("append", "big", "register"):
            n = rng.randint(1, 5) if kind == "append" else 1500
            rows = self.rows(list(range(self.next_id, self.next_id + n)))
            if kind == "register":
                register(t, str(self.next_id), rows)
            else:
                t.append(rows)
            self.next_id += n
            self.appends.add(t.version)
        elif kind == "delete" and (doomed := self.live(3)):
            t.delete(f"id IN ({', '.join(map(str, doomed))})")
        elif kind == "range":
            lo = rng.randint(0, max(self.next_id, 1))
            t.delete(f"id BETWEEN {lo} AND {lo + rng.randint(0, 20)}")
        elif kind == "upsert":
            t.upsert(self.rows([*self.live(2), self.next_id]))
            self.next_id += 1
        elif kind == "update" and (numeric := [f.name for f in t.schema if pa.types.is_integer(f.type)][1:]):
            t.update({numeric[0]: f"{numeric[0]} + 1"}, where=f"id < {rng.randint(0, max(self.next_id, 1))}")
        elif kind == "compact":
            t.compact()
        elif kind in ("erase", "purge") and (doomed := self.live(1)):
            t.erase(f"id = {doomed[0]}", purge=kind == "purge")
        elif kind == "alter":
            self.alter()
        elif kind == "partition":
            self.spec = rng.choice([i for i in range(len(SPECS)) if i != self.spec])
            t.partition_by(SPECS[self.spec])
        if t.version != before:
            self.kinds.add(kind)
        if t.version not in self.published:
            try:
                publish(t)
            except IcebergPublishError as e:  # a registered file a name of which now belongs to another column
                assert "compact" in str(e), e
                self.kinds.add("refused")
                t.compact(min_file_size=1 << 30)  # the documented way on: its files rewritten with ids
                publish(t)
            self.published.append(t.version)

    def alter(self) -> None:
        """The next of: swap two names, reuse a renamed name, widen, drop and re-add a name."""
        t = self.table
        names = set(t.schema.names)
        change = self.renames % 4
        self.renames += 1
        if change == 0 and {"a", "b"} <= names:
            with t.alter() as c:
                c.rename_column("a", "tmp").rename_column("b", "a")
            t.alter().rename_column("tmp", "b").commit()
        elif change == 1 and "a" in names:
            renamed = f"_a.{self.renames} é"  # a name as data has them: leading _, a dot, a space, not ASCII
            t.alter().rename_column("a", renamed).add_column("a", pa.string()).commit()
        elif change == 2 and "n" in names and t.schema.field("n").type == pa.int32():
            t.alter().widen_column("n", pa.int64()).commit()
        elif "b" in names:
            t.alter().drop_column("b").commit()
            t.alter().add_column("b", pa.int32()).commit()

    def run(self, steps: int, *, expire_at: int | None = None) -> None:
        for i in range(steps):
            self.step()
            if i == expire_at:
                self.table.expire(retain_versions=8)

    def retained(self) -> list[int]:
        """The published versions the newest metadata lists: retained, and not left out because a
        file registered without ids in them would be misread under the current name mapping."""
        kept = {h.version for h in self.table.history()}
        listed = {s.snapshot_id for s in static(self.table).metadata.snapshots}
        return [v for v in self.published if v in kept and v in listed and v > 0]

    def choose_spans(self, count: int) -> list[tuple[int, int]]:
        """Up to ``count`` pairs (a, b) of retained versions between which every version only
        appended new keys (kept as ``spans``): the rows an incremental append scan reads there
        are exactly those ``b`` holds and ``a`` does not, whatever a reader does with deletes."""
        kept = self.retained()
        spans = []
        for i, a in enumerate(kept):
            for b in kept[i + 1 :]:
                if all(v in self.appends for v in range(a + 1, b + 1)):
                    spans.append((a, b))
        self.spans = self.rng.sample(spans, min(count, len(spans)))
        return self.spans

    def added(self, a: int, b: int) -> pa.Table:
        """The rows appended after version ``a`` up to ``b``, as incremental readers give them:
        in the table's current schema (columns found by id, renamed ones under their current
        names, widened ones widened, columns added since NULL), not version ``b``'s."""
        before = set(self.table.scan(["id"], version=a).to_arrow().column("id").to_pylist())
        rows = self.table.scan(version=b).to_arrow()
        rows = rows.filter(pa.array([i not in before for i in rows.column("id").to_pylist()]))
        then = {field_id(f): f.name for f in self.table.snapshot(b).schema}
        columns = {}
        for f in self.table.schema:
            name = then.get(field_id(f))
            columns[f.name] = rows.column(name).cast(f.type) if name is not None else pa.nulls(len(rows), f.type)
        return pa.table(columns)


def same(got: pa.Table, want: pa.Table, what: str) -> None:
    """``got`` (another engine's) holds exactly ``want``'s rows, by column name, whatever the
    order and the engine's string and timestamp layouts."""
    assert sorted(got.column_names) == sorted(want.column_names), f"{what}: {got.column_names}"
    got = got.select(want.column_names).cast(want.schema).sort_by("id")
    assert got.equals(want.sort_by("id")), f"{what}: {got.num_rows} rows against {want.num_rows}"


def static(table: castable.Table) -> StaticTable:
    return StaticTable.from_metadata(f"{table.uri}/{ICEBERG_PREFIX}v{table.version}.metadata.json")


def java_reads(out: Path, reads: list[tuple[str, str]]) -> list[pa.Table]:
    """What Java Iceberg reads for each of ``reads``: (table location, snapshot id or ``a:b``,
    the rows appended after a up to b), in order, in one JVM."""
    helper = Path(__file__).parent / "java_iceberg.py"
    out.mkdir(parents=True, exist_ok=True)
    args = [f"{location}@{at}" for location, at in reads]
    subprocess.run([str(SPARK35), str(helper), str(JARS), str(out), *args], check=True, timeout=3600)
    return _read_all(out, len(reads))


def _read_all(out: Path, count: int) -> list[pa.Table]:
    found = []
    for i in range(count):
        with pa.OSFile(str(out / f"{i}.arrow")) as source:
            found.append(pa.ipc.open_file(source).read_all())
    return found


def rust_reads(out: Path, table: castable.Table, versions: list[int]) -> list[pa.Table]:
    """What iceberg-rust reads at each of ``versions`` of ``table`` (each from its own metadata
    file, whose current snapshot it is), in order."""
    helper = Path(__file__).parent / "rust_iceberg.py"
    out.mkdir(parents=True, exist_ok=True)
    locations = [f"{table.uri}/{ICEBERG_PREFIX}v{v}.metadata.json" for v in versions]
    subprocess.run([str(READERS), str(helper), str(out), *locations], check=True, timeout=600)
    return _read_all(out, len(locations))


def differences(history: History, java: list[pa.Table] | None = None, rust: list[pa.Table] | None = None) -> list[str]:
    """Where pyiceberg, Java (``java``: its reads of ``java_plan(history)``, in order) and
    iceberg-rust (``rust``: ``rust_reads``) read the history otherwise than castable; empty if
    nowhere."""
    table, metadata = history.table, static(history.table)
    found = []
    wanted = [(str(v), table.scan(version=v).to_arrow()) for v in history.retained()]
    wanted += [(f"{a}:{b}", history.added(a, b)) for a, b in history.spans]
    for i, (at, want) in enumerate(wanted):
        if ":" in at:
            a, b = map(int, at.split(":"))
            read = metadata.incremental_append_scan(from_snapshot_id_exclusive=a, to_snapshot_id_inclusive=b).to_arrow()
        else:
            read = metadata.scan(snapshot_id=int(at)).to_arrow()
        readers = [("pyiceberg", read)] + ([("Java", java[i])] if java is not None else [])
        if rust is not None and i < len(rust):
            readers.append(("iceberg-rust", rust[i]))
        for reader, got in readers:
            try:
                same(got, want, f"{reader} at {at}")
            except AssertionError as e:
                found.append(f"{table.uri}: {e}")
    return found


def java_plan(history: History) -> list[tuple[str, str]]:
    """The reads ``differences`` compares Java's with: every retained version, then the spans."""
    uri = history.table.uri
    return [(uri, str(v)) for v in history.retained()] + [(uri, f"{a}:{b}") for a, b in history.spans]
