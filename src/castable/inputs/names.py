"""Column names written in command-line text, quoted as SQL quotes them.

A name is written bare (``amount``) or quoted, in double quotes or backticks, with a quote of
the same kind inside doubled: ``"my col"``, ```a.b```, ``"a""b"`` (the name ``a"b``). A bare name runs to
the next separator (``:``, ``=`` or ``,``, as the option says) and loses its surrounding
blanks; a quoted one is exactly what the quotes hold, so any name a table may have (dots,
spaces, separators, a leading ``_``) can be written. The same rule holds in ``--schema``,
``alter``'s options, ``--columns`` and SQL predicates (:mod:`castable.read.sql_dialect`)."""

from __future__ import annotations

from castable.errors import InvalidInputError

QUOTES = ('"', "`")
_OPENING = {"[": "]", "(": ")", "<": ">"}


def read_name(text: str, pos: int, stops: str) -> tuple[str, int]:
    """The name starting at ``text[pos:]`` (after blanks) and the position just after it: a
    quoted name, or the bare text before the first character of ``stops`` (stripped)."""
    while pos < len(text) and text[pos].isspace():
        pos += 1
    if pos < len(text) and text[pos] in QUOTES:
        quote, out, i = text[pos], [], pos + 1
        while i < len(text):
            if text[i] == quote:
                if text.startswith(quote * 2, i):
                    out.append(quote)
                    i += 2
                    continue
                return "".join(out), i + 1
            out.append(text[i])
            i += 1
        raise InvalidInputError(f"{text!r}: the name quoted at position {pos} has no closing {quote}")
    end = min((i for c in stops if (i := text.find(c, pos)) != -1), default=len(text))
    return text[pos:end].strip(), end


def split_top_level(text: str, sep: str = ",") -> list[str]:
    """``text`` split at each ``sep`` outside quotes, brackets, parentheses and angle brackets."""
    parts, depth, start, i = [], 0, 0, 0
    while i < len(text):
        ch = text[i]
        if ch in QUOTES:
            _, i = read_name(text, i, "")
            continue
        if ch in _OPENING:
            depth += 1
        elif ch in _OPENING.values():
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
        i += 1
    return [*parts, text[start:]]


def parse_names(text: str) -> list[str]:
    """``A,B,...`` (each name bare or quoted) as a list of names; an empty one is refused."""
    names = []
    for part in split_top_level(text):
        name, end = read_name(part, 0, "")
        if not name or part[end:].strip():
            raise InvalidInputError(f'{text!r} is not a list of column names (A,B,... with "quoted names")')
        names.append(name)
    return names


def parse_path(text: str, stops: str = "") -> tuple[str | tuple[str, ...], int]:
    """A column, or a field inside one, named at the start of ``text`` (up to the first of
    ``stops`` outside quotes): names joined by ``.`` as in SQL, each bare or quoted
    (``payload.user``, ``"a.b".c``); a lone name as it is, several as a tuple path. The
    position just after it."""
    parts, pos = [], 0
    while True:
        name, pos = read_name(text, pos, stops + ".")
        if not name:
            raise InvalidInputError(f"{text.strip()!r}: a column or field name is empty")
        parts.append(name)
        if not text.startswith(".", pos):
            return (parts[0] if len(parts) == 1 else tuple(parts)), pos
        pos += 1


def split_pair(item: str, sep: str, what: str) -> tuple[str, str]:
    """``NAME<sep>REST`` (the name bare or quoted) as ``(name, rest)``, the rest stripped."""
    name, end = read_name(item, 0, sep)
    rest = item[end:].lstrip()
    if not name or not rest.startswith(sep) or not rest[len(sep) :].strip():
        raise InvalidInputError(f"{item.strip()!r} is not {what}")
    return name, rest[len(sep) :].strip()
