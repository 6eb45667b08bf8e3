"""catalog_load.py's clients, in a process of their own so that they share no interpreter with
the server they load: ``CLIENTS`` threads, each on its own keep-alive connection, send ``GET
PATH`` for ``SECONDS`` seconds; prints one JSON line (answers, errors, seconds, each answer's
latency in milliseconds).

Usage: python -m bench.iceberg.catalog_load_clients URI PATH CLIENTS SECONDS [TOKEN]
"""

from __future__ import annotations

import http.client
import json
import sys
import threading
import time
from urllib.parse import urlsplit


def main() -> None:
    uri, path, clients, seconds, *token = sys.argv[1:]
    address = urlsplit(uri)
    headers = {"Authorization": f"Bearer {token[0]}"} if token else {}
    latencies: list[float] = []
    errors: list[int] = []
    lock = threading.Lock()
    start = threading.Barrier(int(clients) + 1)
    deadline = [0.0]

    def client() -> None:
        conn = http.client.HTTPConnection(address.hostname, address.port, timeout=60)
        mine: list[float] = []
        failed = 0
        start.wait()
        while time.perf_counter() < deadline[0]:
            t0 = time.perf_counter()
            conn.request("GET", path, headers=headers)
            answer = conn.getresponse()
            answer.read()
            mine.append((time.perf_counter() - t0) * 1000)
            failed += answer.status != 200
        conn.close()
        with lock:
            latencies.extend(mine)
            errors.append(failed)

    threads = [threading.Thread(target=client) for _ in range(int(clients))]
    for t in threads:
        t.start()
    deadline[0] = time.perf_counter() + float(seconds)
    began = time.perf_counter()
    start.wait()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - began
    print(json.dumps({"answers": len(latencies), "errors": sum(errors), "seconds": elapsed, "latencies": latencies}))


if __name__ == "__main__":
    main()
