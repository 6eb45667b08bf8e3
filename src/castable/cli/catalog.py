"""``castable catalog serve``: the Iceberg REST catalog of a warehouse folder (``castable.catalog``)."""

from __future__ import annotations

import logging
import sys
from typing import Annotated

import typer

from castable.cli.common import StorageOption, commands, console, parse_options
from castable.errors import InvalidInputError

catalog_app = commands(
    help="An Iceberg REST catalog of the castable tables under a folder: every Iceberg engine writes them.",
    no_args_is_help=True,
)


@catalog_app.command()
def serve(
    warehouse: Annotated[str, typer.Argument(help="The folder of the tables: a directory or s3://bucket/prefix.")],
    host: Annotated[str, typer.Option(help="The address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="The port to listen on (0: a free one).")] = 8181,
    storage_option: StorageOption = None,
    quiet: Annotated[bool, typer.Option("--quiet", help="Print no line per request.")] = False,
) -> None:
    """Serve the Iceberg REST catalog of WAREHOUSE until interrupted: namespaces are its folders,
    and Iceberg clients (uri=http://HOST:PORT) create, read and commit to its castable tables.
    Each request is logged on standard error (client, request line, status)."""
    try:
        from castable.catalog import Catalog, Warehouse, make_server
    except ImportError as e:
        raise InvalidInputError(f"the catalog needs pyiceberg: pip install 'castable[iceberg]' ({e})") from e
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(message)s", stream=sys.stderr)
    if not quiet:
        logging.getLogger("castable.catalog.server").setLevel(logging.INFO)
    server = make_server(Catalog(Warehouse.at(warehouse, parse_options(storage_option))), host, port)
    console.print(f"Iceberg REST catalog of {warehouse} at http://{host}:{server.server_address[1]}", highlight=False)
    with server:
        server.serve_forever()
