"""The ``castable`` command line (typer for parsing, rich for output): the table and db commands as one app."""

from __future__ import annotations

from typing import Annotated

import typer

import castable
from castable.cli.catalog import catalog_app
from castable.cli.common import commands, console, run
from castable.cli.databases import db_app
from castable.cli.iceberg import iceberg_app
from castable.cli.maintenance import maintenance_app
from castable.cli.reads import reads_app
from castable.cli.tables import tables_app

app = commands(
    help="ACID tables on S3 or a local directory: create, append, delete, scan, time travel.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.add_typer(tables_app)
app.add_typer(reads_app)
app.add_typer(maintenance_app)
app.add_typer(db_app, name="db")
app.add_typer(iceberg_app, name="iceberg")
app.add_typer(catalog_app, name="catalog")


def _version(show: bool) -> None:
    if show:
        console.print(f"castable {castable.__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """ACID tables on S3 or a local directory: create, append, delete, scan, time travel."""


def main() -> None:
    """Entry point: castable errors are one line and exit status 1, Ctrl-C one line and exit status 130."""
    run(app)
