"""How many ``loadTable`` requests the served catalog answers a second at 16 concurrent clients,
on its HTTP stack (the Starlette application on uvicorn, as ``castable catalog serve`` runs it),
without and with bearer tokens, beside the standard library's threading HTTP server that served
the catalog before (the same :meth:`Catalog.handle` behind it, kept here as the baseline).

The table is a castable table of ``--versions`` versions on the local disk; the clients (16
threads, each on its own keep-alive connection, ``catalog_load_clients.py``) run in a process
of their own for ``--seconds`` seconds per round; ``--repeats`` rounds per server, the servers
taking turns; medians of the rounds' answers per second, and the median and p99 latency of the
median round.

Usage: python -m bench catalog-load [--clients 16] [--seconds 5] [--repeats 3] [--versions 20] [--out DIR]
Writes DIR/catalog_load.md (DIR defaults to bench/results/).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pyarrow as pa

import castable
from bench.common.benchlib import RESULTS, log, publish, report_header
from castable.catalog import Access, Catalog, Request, Warehouse
from castable.catalog.server import make_server

PATH = "/v1/namespaces/db/tables/t"
TOKEN = "a-bench-token-of-24-characters"
UVICORN, UVICORN_AUTH, STDLIB = (
    "Starlette on uvicorn (castable catalog serve)",
    "Starlette on uvicorn, bearer token required",
    "standard library threading server (before)",
)


@contextmanager
def uvicorn_served(catalog: Catalog, access: Access | None) -> Iterator[str]:
    server = make_server(catalog, port=0, access=access, access_log=False)
    thread = server.start()
    try:
        yield f"http://127.0.0.1:{server.port}"
    finally:
        server.shutdown()
        thread.join(timeout=10)
        server.close()


@contextmanager
def stdlib_served(catalog: Catalog) -> Iterator[str]:
    """The catalog's former server: a thread per connection, framing by hand."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            url = urlsplit(self.path)
            request = Request("GET", url.path, dict(parse_qsl(url.query)), dict(self.headers.items()))
            response = catalog.handle(request)
            data = json.dumps(response.body).encode()
            self.send_response(response.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def load(uri: str, clients: int, seconds: float, token: str | None) -> dict[str, Any]:
    command = [sys.executable, "-m", "bench.iceberg.catalog_load_clients", uri, PATH, str(clients), str(seconds)]
    done = subprocess.run([*command, *([token] if token else [])], capture_output=True, text=True, check=True)
    result: dict[str, Any] = json.loads(done.stdout)
    assert result["answers"] > 0, result
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--versions", type=int, default=20)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--quick", action="store_true", help="1 round of 1 second per server")
    args = parser.parse_args()
    if args.quick:
        args.seconds, args.repeats = 1.0, 1
    rounds: dict[str, list[dict[str, Any]]] = {UVICORN: [], UVICORN_AUTH: [], STDLIB: []}
    with tempfile.TemporaryDirectory(prefix="castable-bench-catalog-load-") as tmp:
        table = castable.create_table(f"{tmp}/db/t", pa.schema([pa.field("id", pa.int64(), nullable=False)]))
        for v in range(args.versions):
            table.append(pa.table({"id": pa.array([v], pa.int64())}))
        catalog = Catalog(Warehouse.at(tmp))
        assert catalog.handle(Request("GET", PATH, {}, {})).status == 200  # its Iceberg metadata published
        servers: dict[str, Callable[[], Any]] = {
            UVICORN: lambda: uvicorn_served(catalog, None),
            UVICORN_AUTH: lambda: uvicorn_served(catalog, Access.from_token(TOKEN)),
            STDLIB: lambda: stdlib_served(catalog),
        }
        for r in range(args.repeats):
            for name, serve in servers.items():
                log(f"round {r + 1}: {name}, {args.clients} clients for {args.seconds:g} s")
                with serve() as uri:
                    token = TOKEN if name == UVICORN_AUTH else None
                    rounds[name].append(load(uri, args.clients, args.seconds, token))
    lines = report_header(
        "loadTable requests per second through the served catalog",
        f"{args.clients} concurrent clients (keep-alive connections, a process of their own), "
        f"{args.seconds:g} s a round, {args.repeats} rounds per server taking turns; a table of "
        f"{args.versions + 1} versions on the local disk; medians.",
    )
    lines += ["| server | answers/s | ratio to before | p50 | p99 |", "|---|---:|---:|---:|---:|"]
    rates = {name: [r["answers"] / r["seconds"] for r in found] for name, found in rounds.items()}
    baseline = statistics.median(rates[STDLIB])
    for name, found in rounds.items():
        median_round = sorted(found, key=lambda r: r["answers"] / r["seconds"])[len(found) // 2]
        latencies = sorted(median_round["latencies"])
        p50, p99 = latencies[len(latencies) // 2], latencies[int(len(latencies) * 0.99)]
        rate = statistics.median(rates[name])
        lines.append(f"| {name} | {rate:,.0f} | {rate / baseline:.2f}x | {p50:.1f} ms | {p99:.1f} ms |")
        print(f"{name}: {rate:,.0f} answers/s ({rate / baseline:.2f}x before), p50 {p50:.1f} ms, p99 {p99:.1f} ms")
    failed = sum(r["errors"] for found in rounds.values() for r in found)
    answered = sum(r["answers"] for found in rounds.values() for r in found)
    new = statistics.median(rates[UVICORN]) / baseline
    lines += [
        "",
        "## Targets",
        "",
        f"- Every loadTable answered 200 under {args.clients} concurrent clients, on every server: "
        f"**{'met' if failed == 0 else 'missed'}** ({failed} of {answered:,} failed).",
        f"- Answers per second on the new stack, beside the former server's (a figure, with no threshold): {new:.2f}x.",
    ]
    publish("catalog_load", lines, args.out)


if __name__ == "__main__":
    main()
