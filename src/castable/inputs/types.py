"""Arrow data types written as text: what ``castable info`` prints, ``--schema`` accepts.

``parse_type(str(t)) == t`` for the types tables hold: primitives, ``timestamp[us, tz=UTC]``,
``decimal128(10, 2)``, ``fixed_size_binary[16]``, ``list<item: string>``, ``struct<a: int64>``,
``map<string, int64>``, as well as pyarrow's aliases (``double``, ``utf8``, ``timestamp[ms]``).
pyarrow parses only the aliases, so the rest is a small recursive-descent parser.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import pyarrow as pa

from castable.errors import InvalidInputError
from castable.inputs.names import QUOTES, read_name, split_pair, split_top_level

EXAMPLES = "int64, double, string, date32, timestamp[us, tz=UTC], decimal128(10, 2), list<item: string>"
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SIZE = re.compile(r"[0-9]+")
_SCALE = re.compile(r"-?[0-9]+")
# A field name is whatever comes before a ':' and holds none of the characters types are built of.
_FIELD_NAME = re.compile(r"\s*([^:<>\[\](),]*?)\s*:")
_DECIMALS: dict[str, Callable[[int, int], pa.DataType]] = {
    "decimal": pa.decimal128, "decimal32": pa.decimal32, "decimal64": pa.decimal64,
    "decimal128": pa.decimal128, "decimal256": pa.decimal256,
}  # fmt: skip
_LISTS: dict[str, Callable[[pa.Field], pa.DataType]] = {
    "list": pa.list_, "large_list": pa.large_list, "list_view": pa.list_view, "large_list_view": pa.large_list_view,
}  # fmt: skip


class _Parser:
    """One pass over ``text``: each method consumes what it parses, skipping blanks."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def fail(self, expected: str) -> InvalidInputError:
        found = repr(self.text[self.pos :]) if self.pos < len(self.text) else "the end"
        return InvalidInputError(
            f"cannot read the type {self.text!r}: expected {expected} at position {self.pos}, found {found} "
            f"(types look like {EXAMPLES})"
        )

    def _skip(self) -> int:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1
        return self.pos

    def _match(self, pattern: re.Pattern[str], expected: str) -> str:
        found = pattern.match(self.text, self._skip())
        if found is None:
            raise self.fail(expected)
        self.pos = found.end()
        return found.group()

    def eat(self, token: str) -> bool:
        if self.text.startswith(token, self._skip()):
            self.pos += len(token)
            return True
        return False

    def expect(self, token: str) -> None:
        if not self.eat(token):
            raise self.fail(repr(token))

    def done(self) -> None:
        if self._skip() < len(self.text):
            raise self.fail("the end of the type")

    def field(self) -> pa.Field:
        """``name: type [not null]``, the name bare or quoted (:mod:`castable.inputs.names`); a
        bare type is a field named ``item`` (as in ``list<string>``)."""
        name = "item"
        if self.text[self._skip() :].startswith(QUOTES):
            name, self.pos = read_name(self.text, self.pos, "")
            self.expect(":")
        elif named := _FIELD_NAME.match(self.text, self.pos):
            name, self.pos = named.group(1), named.end()
        value = self.type()
        nullable = not self.eat("not null")
        return pa.field(name, value, nullable=nullable)

    def type(self) -> pa.DataType:
        start = self._skip()
        name = self._match(_WORD, "a type name").lower()
        if name in _LISTS or name == "fixed_size_list":
            self.expect("<")
            item = self.field()
            self.expect(">")
            if name in _LISTS:
                return _LISTS[name](item)
            self.expect("[")
            size = int(self._match(_SIZE, "a list size"))
            self.expect("]")
            return pa.list_(item, size)
        if name == "struct":
            self.expect("<")
            fields = [] if self.eat(">") else [self.field()]
            while fields and not self.eat(">"):
                if not self.eat(","):
                    raise self.fail("',' or '>'")
                fields.append(self.field())
            return pa.struct(fields)
        if name == "map":
            self.expect("<")
            key = self.type()
            self.expect(",")
            item = self.type()
            keys_sorted = self.eat(",")
            if keys_sorted:
                self.expect("keys_sorted")
            self.expect(">")
            return pa.map_(key, item, keys_sorted=keys_sorted)
        if name in _DECIMALS:
            self.expect("(")
            precision = int(self._match(_SIZE, "a precision"))
            scale = int(self._match(_SCALE, "a scale")) if self.eat(",") else 0
            self.expect(")")
            return self._build(lambda: _DECIMALS[name](precision, scale), f"{name}({precision}, {scale})")
        return self._bracketed(name, start) if self.eat("[") else self._alias(name, start)

    def _bracketed(self, name: str, start: int) -> pa.DataType:
        """After ``name[``: ``fixed_size_binary[n]``, ``timestamp[unit, tz=zone]``, or an alias like ``time64[us]``."""
        if name == "fixed_size_binary":
            size = int(self._match(_SIZE, "a byte width"))
            self.expect("]")
            return pa.binary(size)
        unit = self._match(_WORD, "a unit (s, ms, us, ns, day)").lower()
        if name == "timestamp" and self.eat(","):
            self.expect("tz")
            self.expect("=")
            end = self.text.find("]", self.pos)
            zone = self.text[self.pos : end].strip() if end != -1 else ""
            if not zone:
                raise self.fail("a time zone and ']'")
            self.pos = end + 1
            return self._build(lambda: pa.timestamp(unit, tz=zone), f"timestamp[{unit}, tz={zone}]")
        self.expect("]")
        return self._alias(f"{name}[{unit}]", start)

    def _alias(self, name: str, start: int) -> pa.DataType:
        try:
            return pa.type_for_alias(name)
        except ValueError:
            raise InvalidInputError(
                f"unknown type {name!r} at position {start} of {self.text!r} (types look like {EXAMPLES})"
            ) from None

    def _build(self, make: Callable[[], pa.DataType], shown: str) -> pa.DataType:
        try:
            return make()
        except (ValueError, TypeError, pa.ArrowException) as e:
            raise InvalidInputError(
                f"{shown} in {self.text!r} is not a valid type: {e} (types look like {EXAMPLES})"
            ) from None


def parse_type(text: str) -> pa.DataType:
    """The Arrow type ``text`` names, as ``str(type)`` prints it or as a pyarrow alias."""
    parser = _Parser(text)
    parsed = parser.type()
    parser.done()
    return parsed


def parse_schema(spec: str) -> pa.Schema:
    """``NAME:TYPE, NAME:TYPE, ...`` as a schema of nullable columns (commas inside a type belong
    to it; a name with a ``:`` or ``,`` in it is quoted: ``"a:b":int64``)."""
    fields = []
    for part in split_top_level(spec):
        try:
            name, type_text = split_pair(part, ":", "NAME:TYPE (e.g. 'id:int64')")
        except InvalidInputError as e:
            raise InvalidInputError(f"schema field {e}") from None
        try:
            fields.append(pa.field(name, parse_type(type_text)))
        except InvalidInputError as e:
            raise InvalidInputError(f"schema field {name!r}: {e}") from None
    names = [f.name for f in fields]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise InvalidInputError(f"schema names a column more than once: {repeated}")
    return pa.schema(fields)
