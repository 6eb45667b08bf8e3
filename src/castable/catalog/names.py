"""Namespace and table names as the Iceberg REST spec allows them (any non-empty text), and the
folders of the warehouse that hold them (docs/catalog.md, "Names").

A plain name (letters, digits, ``_`` and ``-``, starting with a letter or a digit) is its own
folder, as it always was. Any other is written, byte by byte of its UTF-8, with the bytes
outside letters, digits, ``_`` and ``-`` (and a leading ``_`` or ``-``) as ``=`` and two
upper-case hex digits, as quoted-printable writes them: ``sales.eu`` -> ``sales=2Eeu``,
``_staging`` -> ``=5Fstaging``, ``été`` -> ``=C3=A9t=C3=A9``. A folder name is then made of
letters, digits, ``_``, ``-`` and ``=`` only, characters that S3 keys, URIs, shells and local
file systems all take as they are, never ``/``, ``.``, ``..``, ``%`` or a leading ``_`` (castable's
own objects) or ``.`` (hidden); and the mapping is one to one: a folder that is not the exact
spelling of a name (``=61``, for ``a``, or a lower-case ``=2e``) holds no namespace or table."""

from __future__ import annotations

import re
import string

from castable.catalog.errors import BadRequestError

PLAIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")
"""A name that is its own folder."""
MAX_FOLDER = 255
"""The longest folder name, in bytes: what local file systems allow."""
MAX_PATH = 512
"""The longest folder path of a table (its namespace's folders, its own, the ``/`` between), in
bytes: a table's own keys (``data/...``) fit within S3's 1,024-byte keys below it."""
_KEPT = frozenset((string.ascii_letters + string.digits + "_-").encode())
_ESCAPE = re.compile(r"=([0-9A-F]{2})")


def folder_name(name: str) -> str:
    """The folder that holds namespace level or table ``name``; ``BadRequestError`` for an
    empty name or one whose folder name would be longer than :data:`MAX_FOLDER` bytes."""
    if not name:
        raise BadRequestError("a namespace level or table name is never empty")
    if PLAIN.fullmatch(name):
        folder = name
    else:
        raw = name.encode()
        folder = "".join(
            chr(b) if b in _KEPT and not (i == 0 and b in b"_-") else f"={b:02X}" for i, b in enumerate(raw)
        )
    if len(folder) > MAX_FOLDER:
        raise BadRequestError(
            f"name {name[:100]!r}{'...' if len(name) > 100 else ''} is too long: its folder name would have "
            f"{len(folder)} bytes, and at most {MAX_FOLDER} are allowed"
        )
    return folder


def name_of(folder: str) -> str | None:
    """The namespace level or table name that ``folder`` holds; ``None`` for a folder no name
    maps to (castable's own, one written otherwise than :func:`folder_name` writes it)."""
    if PLAIN.fullmatch(folder):
        return folder
    try:
        name = _ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), folder).encode("latin-1").decode()
    except (UnicodeEncodeError, UnicodeDecodeError):
        return None
    try:
        return name if folder_name(name) == folder else None
    except BadRequestError:
        return None


def folder_path(names: tuple[str, ...]) -> list[str]:
    """The folders of a path of names (a namespace's levels, then perhaps a table's name);
    ``BadRequestError`` when together they are longer than :data:`MAX_PATH` bytes."""
    folders = [folder_name(n) for n in names]
    if len("/".join(folders)) > MAX_PATH:
        raise BadRequestError(
            f"{'.'.join(names)[:200]} is too long: its folders would take {len('/'.join(folders))} bytes, "
            f"and a table's path takes at most {MAX_PATH}"
        )
    return folders
