"""The processes of tests/integration/spark/test_catalog_concurrency.py, one per command (run as a script by the
main venv's Python): the catalog served with every answer recorded, and the writers that race
on one table through it (pyiceberg) and beside it (castable).

    catalog_race.py serve WAREHOUSE LOG          prints the catalog's URI, serves until killed
    catalog_race.py pyiceberg URI NAME FIRST N DIR
    catalog_race.py castable TABLE NAME FIRST N PAUSE DIR

``serve`` appends a JSON line to LOG for each request: {"method", "path", "status", "writer",
"time"}, the writer being the request's ``X-Writer`` header, else its User-Agent. A writer
creates DIR/ready-NAME, waits for DIR/go, then appends N one-row batches, ids FIRST..FIRST+N-1
(castable's PAUSE seconds apart), and prints a JSON line: the ids it committed, the seconds it
took and, for pyiceberg, how often it was told to retry (castable: the version of each commit).
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from pathlib import Path

import pyarrow as pa

WRITER_HEADER = "X-Writer"


def serve(warehouse: str, log: str) -> None:
    from castable.catalog import Catalog, Request, Response, Warehouse
    from castable.catalog.server import make_server

    lock = threading.Lock()

    class Recording(Catalog):
        def handle(self, request: Request) -> Response:
            response = super().handle(request)
            writer = request.header(WRITER_HEADER) or request.header("User-Agent") or ""
            line = {"method": request.method, "path": request.path, "status": response.status}
            line |= {"writer": writer, "time": time.time()}
            with lock, open(log, "a") as out:
                out.write(json.dumps(line) + "\n")
            return response

    server = make_server(Recording(Warehouse.at(warehouse)), port=0)
    print(f"http://127.0.0.1:{server.port}", flush=True)
    server.serve_forever()


def _wait_for_go(folder: Path, name: str) -> float:
    (folder / f"ready-{name}").touch()
    deadline = time.monotonic() + 300
    while not (folder / "go").exists():
        assert time.monotonic() < deadline, "no go"
        time.sleep(0.005)
    return time.monotonic()


def _row(id_: int, name: str) -> pa.Table:
    return pa.table({"id": pa.array([id_], pa.int64()), "writer": pa.array([name], pa.string())})


class _Retries(logging.Handler):
    """Counts pyiceberg's own commit retries (it logs a warning before each)."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("Commit failed due to a concurrent update, retrying"):
            self.count += 1


def pyiceberg_writer(uri: str, name: str, first: int, n: int, folder: Path) -> dict[str, object]:
    """Append through the catalog; a CommitFailedException (pyiceberg gave up retrying) is
    retried here on the reloaded table, and counted."""
    from pyiceberg.catalog.rest import RestCatalog
    from pyiceberg.exceptions import CommitFailedException

    retries = _Retries()
    logging.getLogger("pyiceberg").addHandler(retries)
    catalog = RestCatalog("castable", uri=uri, **{f"header.{WRITER_HEADER}": name})
    table = catalog.load_table("db.t")
    began = _wait_for_go(folder, name)
    ids, gave_up = [], 0
    for i in range(first, first + n):
        while True:
            try:
                table.append(_row(i, name))
                break
            except CommitFailedException:
                gave_up += 1
                table = catalog.load_table("db.t")
        ids.append(i)
    seconds = round(time.monotonic() - began, 1)
    return {"ids": ids, "pyiceberg_retries": retries.count, "gave_up": gave_up, "seconds": seconds}


def castable_writer(uri: str, name: str, first: int, n: int, pause: float, folder: Path) -> dict[str, object]:
    """Append with castable directly (its own retries), each commit with id ``NAME-<id>``."""
    import castable

    table = castable.open_table(uri)
    began = _wait_for_go(folder, name)
    versions = []
    for i in range(first, first + n):
        time.sleep(pause)
        versions.append(table.append(_row(i, name), commit_id=f"{name}-{i}").version)
    seconds = round(time.monotonic() - began, 1)
    return {"ids": list(range(first, first + n)), "versions": versions, "seconds": seconds}


def main() -> None:
    command, *args = sys.argv[1:]
    if command == "serve":
        serve(*args)
    elif command == "pyiceberg":
        uri, name, first, n, folder = args
        print(json.dumps(pyiceberg_writer(uri, name, int(first), int(n), Path(folder))), flush=True)
    else:
        uri, name, first, n, pause, folder = args
        print(json.dumps(castable_writer(uri, name, int(first), int(n), float(pause), Path(folder))), flush=True)


if __name__ == "__main__":
    main()
