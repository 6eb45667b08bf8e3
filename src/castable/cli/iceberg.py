"""``castable iceberg``: publish a table's versions as Iceberg metadata (``castable.iceberg``)."""

from __future__ import annotations

from typing import Annotated

import typer

import castable
from castable.cli.common import AsJson, StorageOption, commands, emit, parse_options
from castable.errors import InvalidInputError

iceberg_app = commands(help="Iceberg metadata beside castable's, for engines that read Iceberg.", no_args_is_help=True)


@iceberg_app.command()
def publish(
    uri: str,
    version: Annotated[int | None, typer.Option(help="The version to publish (default: the newest).")] = None,
    glue: Annotated[
        str | None, typer.Option(help="DATABASE.TABLE: also make this AWS Glue table name it (for Athena).")
    ] = None,
    storage_option: StorageOption = None,
    as_json: AsJson = False,
) -> None:
    """Publish a version (and every retained one not yet published) under <table>/metadata/,
    and with --glue register it as that Glue table (created, or moved forward)."""
    try:
        from castable.iceberg import publish as publish_table
        from castable.iceberg import register_glue
    except ImportError as e:
        raise InvalidInputError(
            f"publishing Iceberg metadata needs pyiceberg: pip install 'castable[iceberg]' ({e})"
        ) from e
    database, _, name = (glue or "").partition(".")
    if glue is not None and not (database and name):
        raise InvalidInputError(f"--glue takes DATABASE.TABLE, not {glue!r}")
    table = castable.open_table(uri, storage_options=parse_options(storage_option))
    location = publish_table(table, version)
    target = table.version if version is None else version
    answer: dict[str, object] = {"version": target, "metadata_location": location}
    text = f"published version {target}: {location}"
    if glue is not None:
        registered = register_glue(table, database, name, location=location)
        answer |= {"glue_table": glue, "glue_metadata_location": registered.metadata_location}
        text += f"\nGlue table {glue}: {registered.metadata_location}"
    emit(as_json, text, answer)
