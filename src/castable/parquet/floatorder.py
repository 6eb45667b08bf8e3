"""Floating-point statistics of a re-encoded row group, stated in the order its file declares.

pyarrow writes the statistics and column indexes of FLOAT, DOUBLE and FLOAT16 columns in the
type-defined order (NaN left out, a zero minimum written as -0.0 and a zero maximum as +0.0)
and counts no NaN: it knows neither ``IEEE754TotalOrder`` nor ``nan_count``. A newer writer
(parquet-java 1.18, as parquet-testing's ``floating_orders_nan_count.parquet``) may declare
the IEEE 754 total order for a column in the footer's ``column_orders`` and count NaNs. A splice
keeps that footer, so the row groups castable re-encodes must state their bounds as it says.

Per the Parquet specification (``ColumnOrder`` in parquet.thrift), in total order
-NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN; the minimum and maximum are the smallest and
largest non-NaN values, or the smallest and largest NaN when every value is NaN; ``nan_count``
is mandatory; a column index's page bounds follow the same rule and ``nan_counts`` counts each
page's NaNs. In the type-defined order pyarrow's bounds stand, and NaNs are counted where the
original chunk counted them.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from castable.parquet.footer import CC_META_DATA, CMD_STATISTICS, RG_COLUMNS, Footer, FooterError
from castable.parquet.thrift import (
    BINARY,
    I32,
    I64,
    LIST,
    TRUE,
    Struct,
    ThriftError,
    ThriftList,
    decode_struct,
    encode_struct,
)

TOTAL_ORDER = 2
"""The ``ColumnOrder`` union's field for ``IEEE754TotalOrder`` (1 is ``TypeDefinedOrder``)."""

# Statistics: deprecated max and min, max_value, min_value, their exactness, nan_count
_ST_MAX, _ST_MIN, _ST_MAX_VALUE, _ST_MIN_VALUE, _ST_MAX_EXACT, _ST_MIN_EXACT, _ST_NAN_COUNT = 1, 2, 5, 6, 7, 8, 9
# ColumnIndex: null_pages, min_values, max_values, boundary_order, nan_counts
_CI_NULL_PAGES, _CI_MIN_VALUES, _CI_MAX_VALUES, _CI_BOUNDARY_ORDER, _CI_NAN_COUNTS = 1, 2, 3, 4, 8
_UNORDERED, _ASCENDING, _DESCENDING = 0, 1, 2
# OffsetIndex: page_locations; PageLocation: first_row_index
_OI_PAGE_LOCATIONS, _PL_FIRST_ROW = 1, 3
_BITS: dict[int, type[np.signedinteger]] = {2: np.int16, 4: np.int32, 8: np.int64}
_FLOATS = {2: np.float16, 4: np.float32, 8: np.float64}


class FloatOrderError(FooterError):
    """A float column whose bounds cannot be restated here (a repeated leaf in total order)."""


@dataclass(frozen=True)
class Bounds:
    """Some float values' minimum and maximum (plain-encoded; ``None`` without a value) and NaNs."""

    lowest: bytes | None
    highest: bytes | None
    nans: int


def total_order_bounds(values: pa.Array, width: int) -> Bounds:
    """The bounds of ``values`` (float16, float32 or float64; nulls ignored) in IEEE 754 total
    order: of the non-NaN values, or of the NaNs when there are only NaNs."""
    bits = _bits(values, width)
    nan = np.isnan(bits.view(_FLOATS[width]))
    among = bits[~nan] if (~nan).any() else bits
    if not len(among):
        return Bounds(None, None, 0)
    keys = np.where(among < 0, among ^ np.iinfo(among.dtype).max, among)  # totalOrder as signed integers
    return Bounds(_plain(among[np.argmin(keys)]), _plain(among[np.argmax(keys)]), int(nan.sum()))


def nan_count(values: pa.Array, width: int) -> int:
    return int(np.isnan(_bits(values, width).view(_FLOATS[width])).sum())


def _bits(values: pa.Array, width: int) -> np.ndarray:
    """The non-null values' bit patterns, as signed integers of their width."""
    present = values.drop_null()
    return np.asarray(present.view(pa.int16()) if width == 2 else present.to_numpy(zero_copy_only=False)).view(
        _BITS[width]
    )


def _plain(bits: np.generic) -> bytes:
    """A value's PLAIN encoding (little-endian), as statistics and column indexes hold it."""
    return bytes(np.asarray(bits).astype(np.asarray(bits).dtype.newbyteorder("<")).tobytes())


def restate(table: pa.Table, footer: Footer, index: int, rg: Struct, indexes: list[dict[str, bytes]]) -> None:
    """Restate, in place, the float bounds and NaN counts of ``rg`` (the re-encoding of row group
    ``index`` of ``footer``'s file from the rows of ``table``) and of its column indexes
    (``indexes``, per chunk, with offset indexes relative to the chunks) as the file's column
    orders say. ``FloatOrderError`` for a repeated float leaf in total order, whose pages'
    values this does not place (a splice then gives way to a rewrite)."""
    widths, orders = footer.float_widths, footer.column_orders
    if not any(widths):
        return
    leaves = _leaf_arrays(table)
    originals = footer.row_groups[index].get(RG_COLUMNS).items
    for leaf, (chunk, original, found) in enumerate(zip(rg.get(RG_COLUMNS).items, originals, indexes, strict=True)):
        width = widths[leaf]
        if width is None:
            continue
        values, repeated = leaves[leaf]
        total = orders[leaf] == TOTAL_ORDER
        counted = total or _has_nan_count(original)
        if repeated and total:
            raise FloatOrderError(f"leaf column {leaf} is a repeated float column in IEEE 754 total order")
        if repeated or not counted:
            continue
        stats = chunk.get(CC_META_DATA).get(CMD_STATISTICS)
        if stats is not None:
            _restate_statistics(stats, values, width, total)
        if "column_index" in found and "offset_index" in found:
            found["column_index"] = _restated_index(found["column_index"], found["offset_index"], values, width, total)


def _has_nan_count(chunk: Struct) -> bool:
    stats = chunk.get(CC_META_DATA).get(CMD_STATISTICS)
    return stats is not None and stats.has(_ST_NAN_COUNT)


def _restate_statistics(stats: Struct, values: pa.Array, width: int, total: bool) -> None:
    stats.set(_ST_NAN_COUNT, I64, nan_count(values, width))
    if not total:
        return
    bounds = total_order_bounds(values, width)
    pairs = ((_ST_MIN_VALUE, _ST_MAX_VALUE, True), (_ST_MIN, _ST_MAX, stats.has(_ST_MIN) or stats.has(_ST_MAX)))
    for low, high, wanted in pairs:
        for fid, value in ((low, bounds.lowest), (high, bounds.highest)):
            if value is None or not wanted:
                stats.remove(fid)
            else:
                stats.set(fid, BINARY, value)
    for fid in (_ST_MIN_EXACT, _ST_MAX_EXACT):
        if stats.has(fid) and bounds.lowest is not None:
            stats.set(fid, TRUE, True)
        else:
            stats.remove(fid)


def _restated_index(column_index: bytes, offset_index: bytes, values: pa.Array, width: int, total: bool) -> bytes:
    """An encoded column index with each page's bounds (in total order) and NaN count restated."""
    try:
        ci, _ = decode_struct(column_index)
        oi, _ = decode_struct(offset_index)
    except ThriftError as e:
        raise FooterError(f"a re-encoded page index is not valid Thrift: {e}") from None
    firsts = [location.get(_PL_FIRST_ROW) for location in oi.get(_OI_PAGE_LOCATIONS).items]
    pages = [values[a:b] for a, b in zip(firsts, [*firsts[1:], len(values)], strict=True)]
    ci.set(_CI_NAN_COUNTS, LIST, ThriftList(I64, [nan_count(page, width) for page in pages]))
    if total:
        nulls = ci.get(_CI_NULL_PAGES).items
        bounds = [total_order_bounds(page, width) for page in pages]
        lows = [b"" if null == TRUE or b.lowest is None else b.lowest for null, b in zip(nulls, bounds, strict=True)]
        highs = [b"" if null == TRUE or b.highest is None else b.highest for null, b in zip(nulls, bounds, strict=True)]
        ci.set(_CI_MIN_VALUES, LIST, ThriftList(BINARY, lows))
        ci.set(_CI_MAX_VALUES, LIST, ThriftList(BINARY, highs))
        shown = [(low, high) for null, low, high in zip(nulls, lows, highs, strict=True) if null != TRUE]
        ci.set(_CI_BOUNDARY_ORDER, I32, _boundary_order(shown, width))
    return encode_struct(ci)


def _boundary_order(bounds: list[tuple[bytes, bytes]], width: int) -> int:
    """ASCENDING when both the pages' minima and maxima never fall in total order, DESCENDING
    when they never rise, else UNORDERED (pages of nulls only are left out)."""
    keys = [[_key(b, width) for b in column] for column in zip(*bounds, strict=True)] if bounds else [[], []]
    if all(a <= b for column in keys for a, b in itertools.pairwise(column)):
        return _ASCENDING
    if all(a >= b for column in keys for a, b in itertools.pairwise(column)):
        return _DESCENDING
    return _UNORDERED


def _key(plain: bytes, width: int) -> int:
    bits = int(np.frombuffer(plain, dtype=np.dtype(_BITS[width]).newbyteorder("<"))[0])
    return bits ^ int(np.iinfo(_BITS[width]).max) if bits < 0 else bits


def _leaf_arrays(table: pa.Table) -> list[tuple[pa.Array, bool]]:
    """Each leaf column's values in Parquet's leaf order, and whether a list holds it (then its
    values are not one per row). A struct's nulls are its fields' nulls, as Parquet stores them."""
    out: list[tuple[pa.Array, bool]] = []

    def walk(array: pa.Array, repeated: bool) -> None:
        t = array.type
        if pa.types.is_dictionary(t):
            walk(array.dictionary_decode(), repeated)
        elif pa.types.is_struct(t):
            for child in array.flatten():
                walk(child, repeated)
        elif pa.types.is_map(t):
            walk(array.keys, True)
            walk(array.items, True)
        elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
            walk(array.flatten(), True)
        else:
            out.append((array, repeated))

    for column in table.columns:
        walk(column.combine_chunks(), False)
    return out
