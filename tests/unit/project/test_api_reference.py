"""The API reference lists what users call, never what the library calls on itself.

The reference is rendered by mkdocstrings from griffe's reading of the sources, filtered by the
member filters of mkdocs.yml; this test reads the sources the same way, applies the same
filters, and checks ``castable.Table`` and ``castable.Database`` against the protocols the
library's own layers use: the operations' ``Handle`` and the ``Committer``."""

from __future__ import annotations

import re
from typing import Any

import griffe
import pytest
import yaml
from helpers import ROOT

from castable.commit.committer import Committer
from castable.commit.handle import Handle

# Members of the protocols that are the user's API as well: what users read and call on a table.
SHARED = {"store", "uri", "version", "schema", "primary_key", "manifest", "settings", "snapshot", "scan"}
SHARED |= {"manifest_at", "append"}


def protocol_members(protocol: type) -> set[str]:
    return {name for name in vars(protocol) if not name.startswith("_")} | set(protocol.__annotations__)


INTERNAL = (protocol_members(Handle) | protocol_members(Committer)) - SHARED


class _Loader(yaml.SafeLoader):
    """mkdocs.yml with its ``!!python/name`` tags read as plain strings."""


_Loader.add_multi_constructor("tag:yaml.org,2002:python/", lambda loader, suffix, node: None)


def shown(qualified: str) -> set[str]:
    """The members the reference lists for ``qualified``, as mkdocs.yml's filters leave them."""
    config: dict[str, Any] = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=_Loader)
    handler = next(p["mkdocstrings"] for p in config["plugins"] if isinstance(p, dict) and "mkdocstrings" in p)
    filters = handler["handlers"]["python"]["options"]["filters"]
    package = griffe.load("castable", search_paths=[str(ROOT / "src")])
    cls = package[qualified.removeprefix("castable.")].final_target
    names = set(cls.all_members)

    def kept(name: str) -> bool:
        for rule in filters:
            exclude = rule.startswith("!")
            if bool(re.search(rule.lstrip("!"), name)) == exclude:
                return False
        return True

    return {name for name in names if kept(name)}


@pytest.mark.parametrize("qualified", ["castable.Table", "castable.Database"])
def test_the_reference_lists_no_internal_member(qualified: str) -> None:
    members = shown(qualified)
    assert members, f"the reference of {qualified} lists nothing: the loader found no members"
    assert not members & INTERNAL, f"{qualified}'s reference lists internal members: {sorted(members & INTERNAL)}"


def test_the_table_holds_no_internal_method_at_all() -> None:
    """Table is a facade over its internal handle: the protocol members only the library calls
    are the handle's, not filtered out of the table's reference but absent from the table."""
    from castable import Table

    assert not set(dir(Table)) & (INTERNAL - {"standalone"}), sorted(set(dir(Table)) & INTERNAL)
    assert {"append", "delete", "compact", "maintenance"} <= shown("castable.Table")
