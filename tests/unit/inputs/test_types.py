"""Arrow types as text: every type castable prints reads back as itself."""

from __future__ import annotations

import pyarrow as pa
import pytest

from castable.errors import InvalidInputError
from castable.inputs.types import parse_schema, parse_type

PRINTED = [
    pa.null(),
    pa.bool_(),
    *(pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(), pa.uint32(), pa.uint64()),
    *(pa.float16(), pa.float32(), pa.float64()),
    *(pa.string(), pa.large_string(), pa.string_view(), pa.binary(), pa.large_binary(), pa.binary_view()),
    pa.binary(16),
    *(pa.date32(), pa.date64(), pa.time32("s"), pa.time32("ms"), pa.time64("us"), pa.time64("ns")),
    *(pa.timestamp(unit) for unit in ("s", "ms", "us", "ns")),
    *(pa.timestamp("us", tz=zone) for zone in ("UTC", "+01:00", "Europe/Paris", "America/Argentina/Buenos_Aires")),
    pa.duration("ms"),
    *(pa.decimal32(5, 2), pa.decimal64(12, 3), pa.decimal128(10, 2), pa.decimal128(38, 0), pa.decimal256(40, -2)),
    pa.list_(pa.int64()),
    pa.list_(pa.field("item", pa.int64(), nullable=False)),
    pa.large_list(pa.string()),
    pa.list_(pa.int32(), 3),
    pa.struct([("a", pa.int64()), ("b", pa.list_(pa.timestamp("us", tz="UTC")))]),
    pa.struct([]),
    pa.map_(pa.string(), pa.int64()),
    pa.map_(pa.string(), pa.struct([("x", pa.decimal128(10, 2))])),
    pa.map_(pa.string(), pa.list_(pa.int8(), 2), keys_sorted=True),
    pa.list_view(pa.int8()),
    pa.large_list_view(pa.field("x", pa.int8(), nullable=False)),
    pa.struct([("é", pa.int8()), ("two words", pa.string()), ("t", pa.timestamp("ns", tz="-05:30"))]),
]


@pytest.mark.parametrize("t", PRINTED, ids=str)
def test_printed_types_read_back(t: pa.DataType) -> None:
    assert parse_type(str(t)) == t


@pytest.mark.parametrize(
    ("text", "t"),
    [
        ("DOUBLE", pa.float64()),
        ("utf8", pa.string()),
        ("str", pa.string()),
        ("float32", pa.float32()),
        ("date32", pa.date32()),
        ("timestamp[ms]", pa.timestamp("ms")),
        ("  timestamp[ us ,tz=UTC ] ", pa.timestamp("us", tz="UTC")),
        ("decimal128(10,2)", pa.decimal128(10, 2)),
        ("decimal(12, 4)", pa.decimal128(12, 4)),
        ("list<string>", pa.list_(pa.string())),
        ("LIST<Timestamp[US, tz=+01:00]>", pa.list_(pa.timestamp("us", tz="+01:00"))),
        ("Timestamp[US]", pa.timestamp("us")),
        ("fixed_size_list<int8>[ 2 ]", pa.list_(pa.int8(), 2)),
        ("struct<a:int64,b:string>", pa.struct([("a", pa.int64()), ("b", pa.string())])),
    ],
)
def test_aliases_and_spacing(text: str, t: pa.DataType) -> None:
    assert parse_type(text) == t


def test_schema_commas_inside_types_belong_to_them() -> None:
    schema = parse_schema(
        "id:int64, ts:timestamp[us, tz=UTC], amount:decimal128(10, 2), tags:list<item: string>, "
        " m : map<string, int64> ,s:struct<a: int64, b: timestamp[s, tz=+01:00]>"
    )
    assert schema == pa.schema(
        [
            ("id", pa.int64()),
            ("ts", pa.timestamp("us", tz="UTC")),
            ("amount", pa.decimal128(10, 2)),
            ("tags", pa.list_(pa.string())),
            ("m", pa.map_(pa.string(), pa.int64())),
            ("s", pa.struct([("a", pa.int64()), ("b", pa.timestamp("s", tz="+01:00"))])),
        ]
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("wat", "unknown type 'wat' at position 0"),
        ("list<wat>", "unknown type 'wat' at position 5"),
        ("timestamp[us", r"expected '\]' at position 12, found the end"),
        ("timestamp[us, tz=]", "expected a time zone"),
        ("timestamp[fortnight]", r"unknown type 'timestamp\[fortnight\]'"),
        ("decimal128(99,2)", r"decimal128\(99, 2\) .* is not a valid type: precision"),
        ("int64 x", "expected the end of the type at position 6, found 'x'"),
        ("list<", "expected a type name at position 5"),
        ("struct<a: int64", "expected ',' or '>' at position 15, found the end"),
        ("fixed_size_binary[-1]", "expected a byte width"),
        ("fixed_size_list<int8>[-1]", "expected a list size"),
        ("decimal128(-1, 2)", "expected a precision"),
        ("map<string, int64, sorted>", "expected 'keys_sorted'"),
        ("map<string>", "expected ','"),
        ("", "expected a type name"),
    ],
)
def test_bad_types_say_where_and_what(text: str, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message) as caught:
        parse_type(text)
    assert "timestamp[us, tz=UTC]" in str(caught.value), "the error shows what types look like"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("id", "'id' is not NAME:TYPE"),
        (":int64", "':int64' is not NAME:TYPE"),
        ("a:", "'a:' is not NAME:TYPE"),
        ("id:int64, id:string", r"more than once: \['id'\]"),
        ("id:int64,, x:string", "'' is not NAME:TYPE"),
        ("id:int64, amount:decimal(99, 2)", r"schema field 'amount': decimal\(99, 2\) .* precision should be between"),
        ("id:int64, tags:list<string", "schema field 'tags': .* expected '>'"),
    ],
)
def test_bad_schemas(spec: str, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        parse_schema(spec)
