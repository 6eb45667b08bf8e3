"""Run as ``python -m helpers.typed_rows <dir>`` with pandas blocked: one table holding every
scalar type castable filters on, written as castable writes it and as pyarrow writes a file that
is registered, then filtered on every column, deleted from and erased with a purge. Prints one
JSON line of what it found; the test compares it with what pyarrow computes."""

from __future__ import annotations

import importlib.abc
import json
import sys
from collections.abc import Sequence
from decimal import Decimal
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType


class NoPandas(importlib.abc.MetaPathFinder):
    """Imports of pandas fail, as where it is not installed."""

    def find_spec(self, name: str, path: Sequence[str] | None, target: ModuleType | None = None) -> ModuleSpec | None:
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


def rows() -> tuple[object, list[tuple[str, str]]]:
    """The rows (a pyarrow Table) and, per column, a SQL literal of its middle row's value (or
    near it)."""
    import numpy as np
    import pyarrow as pa

    n = 9
    ns = [10**18 + 123 * i + 1 for i in range(n)]  # nanoseconds a microsecond cannot hold
    columns = {
        "id": pa.array(range(n), pa.int64()),
        "i8": pa.array([i - 4 for i in range(n)], pa.int8()),
        "u32": pa.array([2**31 + i for i in range(n)], pa.uint32()),
        "u64": pa.array([2**63 + i for i in range(n)], pa.uint64()),  # beyond int64
        "f16": pa.array(np.array([i / 2 for i in range(n)], dtype=np.float16)),
        "f32": pa.array([i * 0.25 for i in range(n)], pa.float32()),
        "f64": pa.array([float("nan") if i == 8 else -0.0 if i == 0 else i * 1.5 for i in range(n)], pa.float64()),
        "d9": pa.array([Decimal(i) / 4 for i in range(n)], pa.decimal128(9, 2)),
        "d12": pa.array([Decimal(i) * Decimal("1.125") for i in range(n)], pa.decimal128(12, 3)),  # INT64 in Parquet
        "d18": pa.array([Decimal(123456789012 + i) / 10**4 for i in range(n)], pa.decimal128(18, 4)),
        "d38": pa.array([Decimal(10**30 + i) for i in range(n)], pa.decimal128(38, 0)),
        "d40": pa.array([Decimal(f"{10**35}.{i:02d}") for i in range(n)], pa.decimal256(40, 2)),
        "s": pa.array([f"v{i}" if i != 3 else "" for i in range(n)], pa.string()),
        "ls": pa.array([f"w{i}" for i in range(n)], pa.large_string()),
        "b": pa.array([i % 2 == 0 for i in range(n)], pa.bool_()),
        "day": pa.array([18000 + i for i in range(n)], pa.date32()),
        "day64": pa.array([(18000 + i) * 86_400_000 for i in range(n)], pa.date64()),
        "ts_s": pa.array([1_600_000_000 + i for i in range(n)], pa.timestamp("s")),
        "ts_ms": pa.array([1_600_000_000_000 + i for i in range(n)], pa.timestamp("ms")),
        "ts_us": pa.array([1_600_000_000_000_000 + i for i in range(n)], pa.timestamp("us", "UTC")),
        "ts_ns": pa.array(ns, pa.timestamp("ns")),
        "ts_nstz": pa.array(ns, pa.timestamp("ns", "Europe/Paris")),
        "bin": pa.array([bytes([i]) * 3 for i in range(n)], pa.large_binary()),
        "t_s": pa.array([3600 + i for i in range(n)], pa.time32("s")),
        "t_ms": pa.array([3_600_000 + i for i in range(n)], pa.time32("ms")),
        "t_us": pa.array([3_600_000_000 + i for i in range(n)], pa.time64("us")),
        "t_ns": pa.array([3_600_000_000_000 + 1000 * i for i in range(n)], pa.time64("ns")),
    }
    table = pa.table(columns)
    mid = 4
    t = table.slice(mid, 1)

    def iso(column: str) -> str:
        from .literals import literal

        return str(literal(t.column(column)[0]))

    literals = [
        ("i8", str(t.column("i8")[0].as_py())),
        ("u32", str(t.column("u32")[0].as_py())),
        ("u64", str(2**63 + mid)),
        ("f16", "2.0"),
        ("f32", "1.0"),
        ("f64", "6.0"),
        ("d9", "1.00"),
        ("d12", "4.500"),
        ("d18", "12345678.9016"),
        ("d38", str(10**30 + mid)),
        ("d40", f"{10**35}.{mid:02d}"),
        ("s", "'v4'"),
        ("ls", "'w4'"),
        ("day", "DATE '2019-04-18'"),
        ("day64", "DATE '2019-04-18'"),
        ("ts_s", iso("ts_s")),
        ("ts_ms", iso("ts_ms")),
        ("ts_us", iso("ts_us")),
        ("ts_ns", iso("ts_ns")),
        ("ts_nstz", iso("ts_nstz")),
        ("t_s", "TIME '01:00:04'"),
        ("t_ms", "TIME '01:00:00.004'"),
        ("t_us", "TIME '01:00:00.000004'"),
        ("t_ns", "'01:00:00.000004'"),
    ]
    return table, literals


def same(a: object, b: object) -> bool:
    """Whether two tables hold the same values, floats compared bit for bit (NaN, -0.0)."""
    import pyarrow as pa

    assert isinstance(a, pa.Table) and isinstance(b, pa.Table)
    if a.schema != b.schema:
        return False
    for x, y in zip(a.columns, b.columns, strict=True):
        x, y = x.combine_chunks(), y.combine_chunks()
        if pa.types.is_floating(x.type):
            bits = (
                pa.int16() if pa.types.is_float16(x.type) else pa.int32() if pa.types.is_float32(x.type) else pa.int64()
            )
            x, y = x.view(bits), y.view(bits)
        if not x.equals(y):
            return False
    return True


def main(root: str) -> None:
    sys.meta_path.insert(0, NoPandas())
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    import castable

    table, literals = rows()
    assert isinstance(table, pa.Table)
    out: dict[str, object] = {}
    written = f"{root}/written.parquet"
    pq.write_table(table, written)  # as pyarrow writes it: seconds become milliseconds
    for how, rows_of in (("append", table), ("add_files", pq.read_table(written))):
        expected = rows_of.replace_schema_metadata(None)
        t = castable.create_table(f"{root}/{how}", expected.schema, primary_key="id")
        if how == "append":
            t.append(expected)
        else:
            Path(f"{root}/{how}/data").mkdir()
            Path(written).rename(f"{root}/{how}/data/foreign.parquet")
            t.add_files(["data/foreign.parquet"])
        out[f"{how}:equal"] = same(t.to_arrow().sort_by("id"), expected)
        for column, sql in literals:
            for op in ("=", ">=", "<"):
                found = sorted(t.scan(filter=f"{column} {op} {sql}").to_arrow().column("id").to_pylist())
                out[f"{how}:{column} {op}"] = found
        t.delete("f16 >= 3.0")
        out[f"{how}:after delete"] = sorted(t.to_arrow().column("id").to_pylist())
        report = t.erase(f"ts_ns < {dict(literals)['ts_ns']}", purge=True)
        out[f"{how}:erase verified"] = report.purge is not None and report.purge.verified
        out[f"{how}:after erase"] = sorted(t.to_arrow().column("id").to_pylist())
        kept = pc.field("id").isin(out[f"{how}:after erase"])
        out[f"{how}:survivors equal"] = same(t.to_arrow().sort_by("id"), expected.filter(kept))
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1])
