"""Run in the DuckDB 1.5.5 side venv (.venv-duckdb15): DuckDB's iceberg extension attached to
an Iceberg REST catalog, running SQL statements in order.

Usage: python duckdb_catalog.py <catalog uri> <statement>...
Prints one JSON line per statement: {"rows": [[...], ...]} or {"error": "..."}. The catalog is
attached as ``c`` with DuckDB's defaults (staged creates, drops without purge), with no
authorization, or with ``CASTABLE_CATALOG_CREDENTIAL=id:secret`` set, with OAuth2 client
credentials as DuckDB's docs configure them (an iceberg secret naming the token endpoint).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import duckdb
import duckdb_extension_avro
import duckdb_extension_httpfs
import duckdb_extension_iceberg


def main() -> None:
    uri, *statements = sys.argv[1:]
    con = duckdb.connect()
    for module in (duckdb_extension_avro, duckdb_extension_httpfs, duckdb_extension_iceberg):
        name = module.__name__.removeprefix("duckdb_extension_")
        path = Path(module.__file__).parent / f"extensions/v{duckdb.__version__}" / f"{name}.duckdb_extension"
        con.sql(f"LOAD '{path}'")
    credential = os.environ.get("CASTABLE_CATALOG_CREDENTIAL")
    if credential:
        client, secret = credential.split(":", 1)
        con.sql(
            f"CREATE SECRET castable (TYPE iceberg, CLIENT_ID '{client}', CLIENT_SECRET '{secret}', "
            f"OAUTH2_SERVER_URI '{uri}/v1/oauth/tokens')"
        )
        con.sql(f"ATTACH '' AS c (TYPE iceberg, SECRET castable, ENDPOINT '{uri}')")
    else:
        con.sql(f"ATTACH '' AS c (TYPE iceberg, ENDPOINT '{uri}', AUTHORIZATION_TYPE 'none')")
    for statement in statements:
        try:
            result = con.sql(statement)
            rows = [] if result is None else [list(r) for r in result.fetchall()]
            print(json.dumps({"rows": rows}, default=str), flush=True)
        except duckdb.Error as e:
            print(json.dumps({"error": str(e)}), flush=True)


if __name__ == "__main__":
    main()
