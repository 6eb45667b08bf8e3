"""``castable iceberg``: publish a table's versions as Iceberg metadata (``castable.iceberg``)."""

from __future__ import annotations

from typing import Annotated

import typer

import castable
from castable.cli.common import AsJson, StorageOption, emit, parse_options
from castable.errors import InvalidInputError

iceberg_app = typer.Typer(
    help="Iceberg metadata beside castable's, for engines that read Iceberg.", no_args_is_help=True
)


@iceberg_app.command()
def publish(
    uri: str,
    version: Annotated[int | None, typer.Option(help="The version to publish (default: the newest).")] = None,
    storage_option: StorageOption = None,
    as_json: AsJson = False,
) -> None:
    """Publish a version (and every retained one not yet published) under <table>/metadata/."""
    try:
        from castable.iceberg import publish as publish_table
    except ImportError as e:
        raise InvalidInputError(
            f"publishing Iceberg metadata needs pyiceberg: pip install 'castable[iceberg]' ({e})"
        ) from e
    table = castable.open_table(uri, storage_options=parse_options(storage_option))
    location = publish_table(table, version)
    target = table.version if version is None else version
    emit(as_json, f"published version {target}: {location}", {"version": target, "metadata_location": location})
