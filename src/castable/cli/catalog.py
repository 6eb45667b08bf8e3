"""``castable catalog serve``: the Iceberg REST catalog of a warehouse folder (``castable.catalog``)."""

from __future__ import annotations

import ipaddress
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from castable.cli.common import StorageOption, commands, console, parse_options
from castable.errors import InvalidInputError

if TYPE_CHECKING:
    from castable.catalog import Access

catalog_app = commands(
    help="An Iceberg REST catalog of the castable tables under a folder: every Iceberg engine writes them.",
    no_args_is_help=True,
)
TOKEN_VARIABLE = "CASTABLE_CATALOG_TOKEN"
"""The environment variable whose value, if set, is the one token that may do everything."""
SECRETS = ("aws_secret_access_key", "aws_session_token", "secret_access_key", "session_token")


@catalog_app.command()
def serve(
    warehouse: Annotated[str, typer.Argument(help="The folder of the tables: a directory or s3://bucket/prefix.")],
    host: Annotated[str, typer.Option(help="The address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="The port to listen on (0: a free one).")] = 8181,
    access: Annotated[
        Path | None,
        typer.Option(help="A TOML file of principals (secret, read or write, namespaces): clients need a token."),
    ] = None,
    allowed_host: Annotated[
        list[str] | None, typer.Option(help="A name clients reach the server by, beyond its address (repeatable).")
    ] = None,
    insecure: Annotated[
        bool, typer.Option("--insecure", help="Serve a non-loopback address without authentication.")
    ] = False,
    ssl_certfile: Annotated[Path | None, typer.Option(help="Serve HTTPS with this certificate (PEM).")] = None,
    ssl_keyfile: Annotated[Path | None, typer.Option(help="The certificate's private key (PEM).")] = None,
    storage_option: StorageOption = None,
    quiet: Annotated[bool, typer.Option("--quiet", help="Print no line per request.")] = False,
) -> None:
    """Serve the Iceberg REST catalog of WAREHOUSE until interrupted: namespaces are its folders,
    and Iceberg clients (uri=http://HOST:PORT) create, read and commit to its castable tables.
    With --access FILE (or CASTABLE_CATALOG_TOKEN set), every request needs a bearer token: a
    principal's secret, or a token from /v1/oauth/tokens (credential=NAME:SECRET). Each request is
    logged on standard error (client, request line, status), never its token."""
    try:
        from castable.catalog import Catalog, Warehouse
        from castable.catalog.server import make_server
    except ImportError as e:
        raise InvalidInputError(f"the catalog needs its extra: pip install 'castable[catalog]' ({e})") from e
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(message)s", stream=sys.stderr)
    if not quiet:
        logging.getLogger("uvicorn.access").setLevel(logging.INFO)
    options = parse_options(storage_option)
    for name in sorted(set(options or {}) & set(SECRETS)):
        console.print(
            f"warning: {name} on the command line is visible to every user of this machine (ps); "
            "give storage credentials in the environment (AWS_SECRET_ACCESS_KEY) or a profile (AWS_PROFILE)",
            style="yellow",
            highlight=False,
        )
    allowed = _access(access)
    if allowed is None and not insecure and not _loopback(host):
        raise InvalidInputError(
            f"{host} is reachable from other machines, and this catalog would let anyone there read, commit "
            f"and purge: give --access FILE (or set {TOKEN_VARIABLE}), or say --insecure"
        )
    every_address = host in ("0.0.0.0", "::")
    tls = {"ssl_certfile": str(ssl_certfile), "ssl_keyfile": str(ssl_keyfile) if ssl_keyfile else None}
    server = make_server(
        Catalog(Warehouse.at(warehouse, options)),
        host,
        port,
        access=allowed,
        hosts=None if every_address and not allowed_host else (allowed_host or []),
        access_log=not quiet,
        **(tls if ssl_certfile else {}),
    )
    guarded = "tokens required" if allowed is not None else "no authentication"
    console.print(
        f"Iceberg REST catalog of {warehouse} ({guarded}) at {server.scheme}://{host}:{server.port}", highlight=False
    )
    try:
        server.serve_forever()
    finally:
        server.close()


def _access(path: Path | None) -> Access | None:
    """Who may use the catalog: the access file's principals, or the environment's one token."""
    from castable.catalog import Access

    if path is not None:
        if os.name == "posix" and path.exists() and path.stat().st_mode & 0o077:
            console.print(
                f"warning: {path} holds secrets and other users of this machine may read it (chmod 600 {path})",
                style="yellow",
                highlight=False,
            )
        return Access.from_file(path)
    token = os.environ.get(TOKEN_VARIABLE)
    return Access.from_token(token) if token else None


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
