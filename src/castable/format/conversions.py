"""The one rule for types, wherever rows enter a table (docs/guides/types.md, its table).

A column is converted to the table's type when no value changes, and refused otherwise:

- **always**, when the table's type holds every value of the given one (:func:`widens`): a
  wider integer or float, a finer unit of time (up to microseconds), a wider decimal, another
  layout of the same text or bytes, a date as a timestamp, a column of NULLs; a dictionary is
  read as its values;
- **value by value**, where the types differ but each value given may still arrive exactly: a
  narrower integer, integers into a float column, a timestamp of another unit or time zone
  (an instant stays the instant), a decimal of another precision or scale; the first value
  that would change is named (``2147483648 does not fit int32``, ``would lose data``);
- **never** otherwise: text is not parsed (that is a reader's job: CSV and JSON files are
  parsed with the table's types), floats are not rounded to integers nor narrowed, a
  timestamp without a time zone is not taken for an instant. The refusal names the column,
  both types and how to convert.

The same rule holds for Arrow data, readers, Parquet files, pandas and polars DataFrames, the
CLI and the Spark writer, so a column means the same thing whichever way it came. ``alter``'s
widening takes the changes of the first kind, since it changes no stored value.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from castable.errors import SchemaMismatchError

_INTS = [pa.int8(), pa.int16(), pa.int32(), pa.int64()]
_UINTS = [pa.uint8(), pa.uint16(), pa.uint32(), pa.uint64()]
_UNITS = ["s", "ms", "us", "ns"]
_LAYOUTS = (
    {pa.string(), pa.large_string(), pa.string_view()},
    {pa.binary(), pa.large_binary(), pa.binary_view()},
)


def widens(old: pa.DataType, new: pa.DataType) -> bool:
    """Whether every ``old`` value is exactly a ``new`` value, whatever the values: the
    conversions applied without looking at them, and the changes ``alter`` lets a column's
    type take (its stored values read as the new type, unchanged)."""
    if old.equals(new) or pa.types.is_null(old):
        return True
    if old in _INTS and new in _INTS:
        return _INTS.index(old) < _INTS.index(new)
    if old in _UINTS and (new in _UINTS or new in _INTS):
        # uint8 fits int16, uint16 fits int32, uint32 fits int64
        return _UINTS.index(old) < (_UINTS.index(new) if new in _UINTS else _INTS.index(new))
    if pa.types.is_floating(old) and pa.types.is_floating(new):
        return bool(old.bit_width < new.bit_width)
    if pa.types.is_decimal(old) and pa.types.is_decimal(new):
        return bool(new.scale == old.scale and new.precision >= old.precision and new.byte_width >= old.byte_width)
    if pa.types.is_timestamp(old) and pa.types.is_timestamp(new):
        # castable stores seconds and milliseconds as microseconds: every value fits up to there
        return bool(old.tz == new.tz and _finer(old.unit, new.unit) and new.unit != "ns")
    if pa.types.is_time(old) and pa.types.is_time(new):
        return _finer(old.unit, new.unit)  # a time of day fits any finer unit
    if pa.types.is_date32(old):
        return pa.types.is_date64(new) or (pa.types.is_timestamp(new) and new.tz is None)
    return same_values(old, new)


def same_values(a: pa.DataType, b: pa.DataType) -> bool:
    """Equal types, or two layouts of the same text or bytes."""
    return a.equals(b) or any(a in group and b in group for group in _LAYOUTS)


def _values_of(t: pa.DataType) -> pa.DataType:
    return t.value_type if pa.types.is_dictionary(t) else t


def _finer(old: str, new: str) -> bool:
    return _UNITS.index(old) <= _UNITS.index(new)


def _value_by_value(old: pa.DataType, new: pa.DataType) -> bool:
    """Whether values of ``old`` may each be a ``new`` value (Arrow's safe cast checks each)."""
    if pa.types.is_integer(old):
        return bool(pa.types.is_integer(new) or pa.types.is_floating(new))
    if pa.types.is_timestamp(old) and pa.types.is_timestamp(new):
        return (old.tz is None) == (new.tz is None)
    if pa.types.is_time(old) and pa.types.is_time(new):
        return True
    return bool(pa.types.is_decimal(old) and pa.types.is_decimal(new))


def refusal(name: str, given: pa.DataType, expected: pa.DataType) -> str | None:
    """Why a column ``name`` of type ``given`` cannot be converted to ``expected`` whatever its
    values, with how to convert it; ``None`` if it may be (:func:`convert` checks the values).
    Dictionaries are compared by their values."""
    given, expected = _values_of(given), _values_of(expected)
    if widens(given, expected) or _value_by_value(given, expected):
        return None
    return f"column {name!r} is {given}, expected {expected}: {_how(name, given, expected)}"


def _how(name: str, given: pa.DataType, expected: pa.DataType) -> str:
    """How a user converts a column castable will not convert."""
    text = any(given in group for group in _LAYOUTS)
    if text and not any(expected in group for group in _LAYOUTS):
        return (
            "castable does not parse text; parse it first (pc.cast in pyarrow, pd.to_numeric or "
            "pd.to_datetime in pandas), or append the file as CSV or JSON, which are read with the table's types"
        )
    if pa.types.is_floating(given) and pa.types.is_integer(expected):
        return (
            "castable does not round floats; give integers (pandas holds integers with missing values "
            f"as floats: df[{name!r}].astype('Int64'))"
        )
    if pa.types.is_floating(given) and pa.types.is_floating(expected):
        return f"{expected} cannot hold every {given}; widen the column (castable alter --widen) or cast the data"
    if pa.types.is_timestamp(given) and pa.types.is_timestamp(expected):
        return (
            "a timestamp without a time zone is not an instant; give the zone it was taken in "
            "(pc.assume_timezone, pandas' tz_localize)"
            if given.tz is None
            else "the column holds timestamps without a time zone; drop the zone first (pc.local_timestamp)"
        )
    return f"cast it to {expected} first if that is what its values mean"


def inferred_type(t: pa.DataType) -> pa.DataType:
    """The type a table created from data or a text file gives a column of type ``t``:
    timestamps in microseconds, the unit Parquet, Iceberg, Delta and Spark hold (pandas gives
    nanoseconds, pyarrow's CSV reader seconds), a dictionary as its values, text and bytes in
    their plain layouts (pandas gives large_string, polars string_view); others as they are."""
    if pa.types.is_timestamp(t):
        return pa.timestamp("us", t.tz)
    if pa.types.is_dictionary(t):
        return inferred_type(t.value_type)
    return next((plain for plain, group in zip((pa.string(), pa.binary()), _LAYOUTS, strict=True) if t in group), t)


def unit_note(name: str, t: pa.DataType) -> str | None:
    """What to say of a column whose timestamp unit other engines do not hold, and how to move
    off it; ``None`` for any other column."""
    if not pa.types.is_timestamp(t) or t.unit == "us":
        return None
    finer = pa.timestamp("us", t.tz)
    if t.unit in ("s", "ms"):
        return (
            f"column {name!r} is {t}: Parquet, Iceberg, Delta and Spark hold microseconds (castable stores it so, "
            f"and takes files of finer units only where each value is whole); "
            f"castable alter TABLE --widen '{name}:{finer}' makes microseconds its type, no file rewritten"
        )
    return (
        f"column {name!r} is {t}: Iceberg v2, Delta and Spark hold microseconds, so they cannot read it as it is; "
        f"a table with a {finer} column takes these rows where each value is a whole microsecond"
    )


def convert(column: pa.Array | pa.ChunkedArray, name: str, to: pa.DataType) -> pa.Array | pa.ChunkedArray:
    """``column`` as ``to`` by the rule above; ``SchemaMismatchError`` naming the column and the
    first value that would change, or why the types do not convert. A dictionary is decoded to
    its values, and encoded again if the table's column is one."""
    if column.type.equals(to):
        return column
    problem = refusal(name, column.type, to)
    if problem is not None:
        raise SchemaMismatchError(problem)
    if pa.types.is_dictionary(column.type):
        column = column.cast(column.type.value_type)
    try:
        values = pc.cast(column, _values_of(to), safe=True)
        return values if values.type.equals(to) else values.cast(to)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise SchemaMismatchError(
            f"column {name!r} ({column.type}) does not convert exactly to {to}: {e}; "
            f"castable converts only where no value changes{_coarse_hint(name, to)}"
        ) from None


def _coarse_hint(name: str, to: pa.DataType) -> str:
    """How a column of seconds or milliseconds moves to microseconds, the unit of Parquet's,
    Iceberg's and Delta's timestamps (and of the values other tools write into it)."""
    if not (pa.types.is_timestamp(to) and to.unit in ("s", "ms")):
        return ""
    finer = pa.timestamp("us", to.tz)
    return f" (the column holds {to.unit}; move it to microseconds: castable alter TABLE --widen '{name}:{finer}')"
