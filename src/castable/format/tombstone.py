"""Tombstone files: which rows of which data files a delete removed (docs/format.md section 6).

A ``.del`` file is UTF-8 JSON Lines. The first line is a header, ``{"castable_tombstone": 1}``;
every other line is one entry naming a data file by its table-relative path:

- ``{"file": F, "row_group": G}``: every row of row group G;
- ``{"file": F, "row_group": G, "positions": B}``: the rows at the given 0-based positions
  within row group G, B being a base64 roaring bitmap in the portable serialization;
- ``{"file": F, "pk_min": L, "pk_max": H}``: every row whose primary key is in [L, H]
  (``null`` for an unbounded side; a NULL key is never in a range);
- ``{"file": F, "pk_in": [K, ...]}``: every row whose primary key is one of the keys; it means
  exactly one ``pk_min = pk_max = K`` entry per key, and is how those are written. A file with
  such lines has header version 2, so that castable versions without them refuse it.

Positions are relative to their row group, so rewriting one group never invalidates the others.
"""

from __future__ import annotations

import base64
import bisect
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyroaring import BitMap

from castable.errors import CorruptObjectError
from castable.format.stats import JsonValue, decode_value, decode_values

TOMBSTONE_FORMAT_VERSION = 1
KEY_LIST_FORMAT_VERSION = 2


@dataclass(frozen=True)
class RowGroupDelete:
    """Rows of one row group: all of them when ``positions`` is ``None``."""

    file: str
    row_group: int
    positions: BitMap | None = None


@dataclass(frozen=True)
class KeyRangeDelete:
    """Rows of one file whose primary key lies in [lo, hi] (JSON-encoded key values)."""

    file: str
    lo: JsonValue | None
    hi: JsonValue | None


@dataclass(frozen=True)
class KeyPointsDelete:
    """Rows of one file whose primary key is one of ``keys`` (JSON-encoded): a ``pk_in`` line,
    kept whole when read so that thousands of keys cost one entry, not one each."""

    file: str
    keys: tuple[JsonValue, ...]


Entry = RowGroupDelete | KeyRangeDelete | KeyPointsDelete


def _is_point(e: Entry) -> bool:
    return isinstance(e, KeyRangeDelete) and e.lo is not None and e.lo == e.hi


def encode(entries: Iterable[Entry]) -> bytes:
    """JSON Lines; single-key ranges of one file are grouped into one ``pk_in`` line."""
    docs: list[dict[str, object]] = []
    points: dict[str, list[JsonValue]] = {}
    for e in entries:
        if isinstance(e, KeyPointsDelete):
            points.setdefault(e.file, []).extend(e.keys)
        elif isinstance(e, KeyRangeDelete):
            if _is_point(e):
                points.setdefault(e.file, []).append(e.lo)  # type: ignore[arg-type]
            else:
                docs.append({"file": e.file, "pk_min": e.lo, "pk_max": e.hi})
        else:
            doc: dict[str, object] = {"file": e.file, "row_group": e.row_group}
            if e.positions is not None:
                doc["positions"] = base64.b64encode(e.positions.serialize()).decode()
            docs.append(doc)
    docs += [{"file": f, "pk_in": keys} for f, keys in points.items()]
    version = KEY_LIST_FORMAT_VERSION if points else TOMBSTONE_FORMAT_VERSION
    lines = [json.dumps({"castable_tombstone": version})]
    lines += [json.dumps(doc, separators=(",", ":")) for doc in docs]
    return ("\n".join(lines) + "\n").encode()


def decode(data: bytes, *, key: str) -> list[Entry]:
    """Parse a tombstone file; anything malformed raises ``CorruptObjectError``."""
    try:
        lines = data.decode().splitlines()
        header = json.loads(lines[0])
        if header.get("castable_tombstone") not in (TOMBSTONE_FORMAT_VERSION, KEY_LIST_FORMAT_VERSION):
            raise ValueError(f"unsupported tombstone header {header!r}")
        entries: list[Entry] = []
        for line in lines[1:]:
            if not line.strip():
                continue
            doc = json.loads(line)
            if "pk_min" in doc:
                entries.append(KeyRangeDelete(str(doc["file"]), doc["pk_min"], doc["pk_max"]))
            elif "pk_in" in doc:
                if not isinstance(doc["pk_in"], list) or None in doc["pk_in"]:
                    raise ValueError("pk_in must be a list of keys")
                entries.append(KeyPointsDelete(str(doc["file"]), tuple(doc["pk_in"])))
            else:
                raw = doc.get("positions")
                positions = None if raw is None else BitMap.deserialize(base64.b64decode(raw))
                entries.append(RowGroupDelete(str(doc["file"]), int(doc["row_group"]), positions))
        return entries
    except (ValueError, KeyError, TypeError, IndexError, AttributeError) as e:
        raise CorruptObjectError(f"{key} is not a valid tombstone file: {e!r}") from None


@dataclass
class FileDeletes:
    """Everything deleted from one data file, merged over all tombstones of a version.

    Single keys (``id IN (...)`` deletes, possibly thousands) are kept apart from proper key
    ranges as one sorted array, so masking them is one set lookup per row group.
    """

    key_type: pa.DataType | None = None
    full_groups: set[int] = field(default_factory=set)
    positions: dict[int, BitMap] = field(default_factory=dict)
    ranges: list[tuple[pa.Scalar, pa.Scalar]] = field(default_factory=list)
    point_values: list[JsonValue] = field(default_factory=list)
    _points: pa.Array | None = field(default=None, init=False, repr=False, compare=False)
    _sorted: list[Any] | None = field(default=None, init=False, repr=False, compare=False)
    _sorted_np: np.ndarray | None = field(default=None, init=False, repr=False, compare=False)
    _resolved: dict[int, np.ndarray] = field(default_factory=dict, init=False, repr=False, compare=False)

    def add(self, entry: Entry, key_type: pa.DataType | None) -> None:
        self._resolved.clear()
        if isinstance(entry, KeyPointsDelete):
            if key_type is None:
                raise CorruptObjectError("a key-list tombstone on a table without a primary key")
            self.key_type = key_type
            self.point_values.extend(entry.keys)
            self._points = self._sorted = self._sorted_np = None
        elif isinstance(entry, KeyRangeDelete):
            if key_type is None:
                raise CorruptObjectError("a key-range tombstone on a table without a primary key")
            self.key_type = key_type
            if _is_point(entry):
                self.point_values.append(entry.lo)  # type: ignore[arg-type]
                self._points = self._sorted = self._sorted_np = None
            else:
                self.ranges.append((_bound(entry.lo, key_type), _bound(entry.hi, key_type)))
        elif entry.positions is None:
            self.full_groups.add(entry.row_group)
        elif entry.row_group in self.positions:
            self.positions[entry.row_group] |= entry.positions
        else:
            self.positions[entry.row_group] = BitMap(entry.positions)

    @property
    def points(self) -> pa.Array:
        """The single deleted keys, sorted and unique (decoded once)."""
        if self._points is None:
            assert self.key_type is not None or not self.point_values
            decoded = decode_values(self.point_values, self.key_type or pa.null())
            self._points = pc.unique(decoded).sort() if len(decoded) else decoded
        return self._points

    def _point_mask(self, keys: pa.Array | pa.ChunkedArray) -> np.ndarray:
        """Rows whose key is one of the single deleted keys: a binary search in the sorted keys
        for integer keys (no hash table built per row group), a set lookup otherwise."""
        if pa.types.is_integer(keys.type) and not keys.null_count and pa.types.is_integer(self.points.type):
            if self._sorted_np is None:
                self._sorted_np = self.points.to_numpy().astype(np.int64)
            values = np.asarray(keys.to_numpy(), dtype=np.int64)
            at = np.searchsorted(self._sorted_np, values).clip(max=len(self._sorted_np) - 1)
            return np.asarray(self._sorted_np[at] == values)
        return np.asarray(pc.fill_null(pc.is_in(keys, value_set=self.points.cast(keys.type)), False))

    @property
    def key_ranges(self) -> list[tuple[pa.Scalar, pa.Scalar]]:
        """Every key range, single keys as ``(k, k)``: what compaction and erase carry over."""
        return self.ranges + [(k, k) for k in self.points]

    @property
    def has_key_deletes(self) -> bool:
        return bool(self.ranges or self.point_values)

    def touches(self, row_group: int, key_bounds: tuple[object, object] | None) -> bool:
        """Whether any delete can hit the row group; ``key_bounds`` is its primary-key (min, max)."""
        if row_group in self.full_groups or row_group in self.positions:
            return True
        if key_bounds is None:
            return self.has_key_deletes
        kmin, kmax = key_bounds
        if self.point_values:
            if self._sorted is None:
                self._sorted = self.points.to_pylist()
            i = bisect.bisect_left(self._sorted, kmin)
            if i < len(self._sorted) and self._sorted[i] <= kmax:
                return True
        return any(self._overlaps(lo, hi, key_bounds) for lo, hi in self.ranges)

    @staticmethod
    def _overlaps(lo: pa.Scalar, hi: pa.Scalar, bounds: tuple[object, object]) -> bool:
        kmin, kmax = bounds
        return (not lo.is_valid or lo.as_py() <= kmax) and (not hi.is_valid or hi.as_py() >= kmin)

    def position_mask(self, row_group: int, num_rows: int) -> np.ndarray:
        """Rows of the row group deleted by position (or as a whole group)."""
        if row_group in self.full_groups:
            return np.ones(num_rows, dtype=bool)
        mask = np.zeros(num_rows, dtype=bool)
        bitmap = self.positions.get(row_group)
        if bitmap is not None:
            idx = np.asarray(bitmap.to_array(), dtype=np.int64)
            mask[idx[idx < num_rows]] = True
        return mask

    def needs_keys(self, row_group: int) -> bool:
        """Whether the row group's deletes include key deletes not yet matched against its keys."""
        return self.has_key_deletes and row_group not in self._resolved

    def deleted_rows(self, row_group: int, num_rows: int, keys: pa.Array | pa.ChunkedArray | None) -> np.ndarray:
        """The sorted positions deleted in a row group (not a whole-group delete), key deletes
        matched against its key column ``keys`` (needed while :meth:`needs_keys`). The answer is
        kept: the file is immutable and these deletes are fixed, so a later read needs neither
        the key column nor the match."""
        rows = self._resolved.get(row_group)
        if rows is None:
            mask = self.position_mask(row_group, num_rows)
            if self.has_key_deletes:
                assert keys is not None, "key deletes need the key column"
                mask |= self.key_mask(keys)
            rows = self._resolved[row_group] = np.flatnonzero(mask).astype(np.uint32)
        return rows

    def key_mask(self, keys: pa.Array | pa.ChunkedArray) -> np.ndarray:
        """Rows whose primary key falls in a deleted key range (a NULL key never does)."""
        mask = np.zeros(len(keys), dtype=bool)
        if self.point_values:
            mask |= self._point_mask(keys)
        for lo, hi in self.ranges:
            inside = pc.is_valid(keys)
            if lo.is_valid:
                inside = pc.and_(inside, pc.greater_equal(keys, lo))
            if hi.is_valid:
                inside = pc.and_(inside, pc.less_equal(keys, hi))
            mask |= np.asarray(pc.fill_null(inside, False), dtype=bool)
        return mask


def _bound(value: JsonValue | None, key_type: pa.DataType) -> pa.Scalar:
    """A key-range bound as a scalar; JSON ``null`` (unbounded) becomes a null scalar."""
    return pa.scalar(None, type=key_type) if value is None else decode_value(value, key_type)
