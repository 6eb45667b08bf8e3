"""Column names in command-line text: bare, or quoted as SQL quotes them."""

from __future__ import annotations

import pytest

from castable.errors import InvalidInputError
from castable.inputs.names import parse_names, split_pair, split_top_level


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("a, b ,c", ["a", "b", "c"]),
        ('"a,b", `c d`, e', ["a,b", "c d", "e"]),
        ('"say ""hi""",`x``y`', ['say "hi"', "x`y"]),
        ("_x,a.b", ["_x", "a.b"]),
    ],
)
def test_a_list_of_names_bare_or_quoted(text: str, names: list[str]) -> None:
    assert parse_names(text) == names


@pytest.mark.parametrize("text", ["a,,b", '"a', '"a" b', ""])
def test_a_list_with_an_empty_unclosed_or_trailing_name_is_refused(text: str) -> None:
    with pytest.raises(InvalidInputError):
        parse_names(text)


def test_a_pair_splits_at_the_first_separator_outside_quotes() -> None:
    assert split_pair(" amount = value * 2 ", "=", "NAME=EXPR") == ("amount", "value * 2")
    assert split_pair('"a=b"=c', "=", "NAME=NEW") == ("a=b", "c")
    with pytest.raises(InvalidInputError, match="'a' is not NAME=NEW"):
        split_pair("a", "=", "NAME=NEW")


def test_commas_inside_quotes_and_brackets_do_not_split() -> None:
    assert split_top_level('"a,b":int64, c:decimal128(10, 2), "d>":map<string, int64>') == [
        '"a,b":int64',
        " c:decimal128(10, 2)",
        ' "d>":map<string, int64>',
    ]
