"""The warehouse's folders for namespace levels and table names (castable.catalog.names): one
to one, plain names unchanged, and every folder name safe as an S3 key, in a URI and on disk."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from castable.catalog.errors import BadRequestError
from castable.catalog.names import MAX_FOLDER, MAX_PATH, folder_name, folder_path, name_of
from castable.store.local import LocalStore

SAFE = re.compile(r"[A-Za-z0-9_=-]+")


@given(st.text(min_size=1, max_size=21))  # 21 characters of 4 bytes fit in 255 escaped
def test_every_name_has_one_safe_folder_that_holds_it_back(name: str) -> None:
    folder = folder_name(name)
    assert SAFE.fullmatch(folder) and not folder.startswith(("_", "-", ".")), folder
    assert name_of(folder) == name


@given(st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_-]{0,40}", fullmatch=True))
def test_a_plain_name_is_its_own_folder(name: str) -> None:
    assert folder_name(name) == name


@given(st.text(alphabet="=_-.aA09%/ é", min_size=1, max_size=12))
def test_a_folder_holds_a_name_only_when_spelled_exactly_as_that_name_is(folder: str) -> None:
    name = name_of(folder)
    assert name is None or folder_name(name) == folder


@pytest.mark.parametrize(
    ("name", "folder"),
    [
        ("sales.eu", "sales=2Eeu"),
        ("_staging", "=5Fstaging"),
        ("été", "=C3=A9t=C3=A9"),
        ("..", "=2E=2E"),
        ("a/b", "a=2Fb"),
    ],
)
def test_the_documented_spellings(name: str, folder: str) -> None:
    assert folder_name(name) == folder


def test_castables_own_folders_and_other_spellings_hold_no_name() -> None:
    for folder in ("_castable", ".hidden", "=61", "a=2e", "=FF", "a=", "é"):
        assert name_of(folder) is None, folder


def test_an_empty_or_too_long_name_or_path_is_a_client_error() -> None:
    with pytest.raises(BadRequestError, match="never empty"):
        folder_name("")
    with pytest.raises(BadRequestError, match=f"at most {MAX_FOLDER} are allowed"):
        folder_name("é" * 50)
    with pytest.raises(BadRequestError, match=f"at most {MAX_PATH}"):
        folder_path(tuple("x" * 200 for _ in range(3)))


def test_a_local_folders_uri_spells_the_folder_as_it_is(tmp_path: Path) -> None:
    """Iceberg's readers take a location's characters as they are: `=` is not %-escaped."""
    store = LocalStore(tmp_path).child(folder_name("_raw data"))
    assert store.uri == f"file://{tmp_path.as_posix()}/=5Fraw=20data"
