"""S3 as it behaves over a network, on one machine: a moto server behind a shaping proxy.

The proxy forwards every request to moto and answers no sooner than ``latency`` after the request
arrived (S3's time to first byte), then sends the body at no more than ``bandwidth`` bytes/s per
connection (a single S3 connection's throughput); throughput comes only from requests in flight.
It counts requests (by method, listings as LIST), bytes and the most requests in flight, read
and reset at ``/__shaping__``.
The moto server runs in its own process with ranged GETs that copy only the range: stock moto
copies the whole object for each one (about 80 ms of CPU per 100 MB), which would penalise clients
that issue many small reads for moto's reasons.

Usage (what bench/reads/shaped.py does): ``with shaped_s3(latency=0.025, bandwidth=90e6) as s3: ...``
with ``s3.endpoint`` (shaped), ``s3.direct`` (moto itself), ``s3.stats()`` and ``s3.reset()``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

CONTROL = "/__shaping__"
ROOT = Path(__file__).resolve().parents[2]
MODULE = "bench.common.shaped_s3"
"""moto and the proxy each run as ``python -m bench.common.shaped_s3`` from ``ROOT``."""
_HOP = {"connection", "keep-alive", "transfer-encoding", "expect", "proxy-connection", "te", "upgrade", "trailer"}
_CHUNK = 256 * 1024


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _Counters:
    """Requests, bytes and requests in flight, shared by the proxy's threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self.lock:
            self.requests: dict[str, int] = {}
            self.bytes_out = 0
            self.bytes_in = 0
            self.in_flight = 0
            self.peak_in_flight = 0
            self.busy_since = 0.0
            self.busy_seconds = 0.0
            self.flight_seconds = 0.0
            self.last_change = time.monotonic()

    def _tick(self) -> None:
        now = time.monotonic()
        if self.in_flight:
            self.busy_seconds += now - self.last_change
            self.flight_seconds += self.in_flight * (now - self.last_change)
        self.last_change = now

    def begin(self, method: str, bytes_in: int) -> None:
        with self.lock:
            self._tick()
            self.requests[method] = self.requests.get(method, 0) + 1
            self.bytes_in += bytes_in
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)

    def end(self, bytes_out: int) -> None:
        with self.lock:
            self._tick()
            self.in_flight -= 1
            self.bytes_out += bytes_out

    def snapshot(self) -> dict[str, Any]:
        """The counters, once the requests in flight have finished (a client has its last byte
        a moment before the proxy's thread counts it)."""
        deadline = time.monotonic() + 2
        while self.in_flight and time.monotonic() < deadline:
            time.sleep(0.001)
        with self.lock:
            self._tick()
            return {
                "requests": dict(self.requests),
                "bytes_out": self.bytes_out,
                "bytes_in": self.bytes_in,
                "peak_in_flight": self.peak_in_flight,
                "busy_seconds": self.busy_seconds,
                "mean_in_flight": self.flight_seconds / self.busy_seconds if self.busy_seconds else 0.0,
            }


def serve_proxy(port: int, upstream: str, latency: float, bandwidth: float) -> None:
    """Run the shaping proxy on ``127.0.0.1:port`` in front of ``upstream`` until killed."""
    target = urlparse(upstream)
    counters = _Counters()
    local = threading.local()

    def connection() -> http.client.HTTPConnection:
        conn = getattr(local, "conn", None)
        if conn is None:
            conn = local.conn = http.client.HTTPConnection(target.hostname or "127.0.0.1", target.port, timeout=600)
        return conn

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            super().setup()  # headers and body go out as written: Nagle's wait would add 40 ms
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _body(self) -> bytes | None:
            if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
                parts: list[bytes] = []
                while True:
                    size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                    if not size:
                        while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                            pass
                        return b"".join(parts)
                    parts.append(self.rfile.read(size))
                    self.rfile.readline()
            length = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(length) if length else None

        def _control(self) -> None:
            if "reset" in self.path:
                counters.reset()
            data = json.dumps(counters.snapshot()).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _forward(self) -> None:
            if self.path.startswith(CONTROL):
                self._control()
                return
            arrived = time.monotonic()
            body = self._body()
            listing = self.command == "GET" and "list-type=" in self.path
            counters.begin("LIST" if listing else self.command, len(body or b""))
            sent = 0
            try:
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
                if body is not None:
                    headers["Content-Length"] = str(len(body))
                for attempt in range(2):  # a kept-alive upstream connection may have been closed
                    try:
                        conn = connection()
                        conn.request(self.command, self.path, body, headers)
                        response = conn.getresponse()
                        data = response.read()
                        break
                    except (http.client.HTTPException, ConnectionError):
                        local.conn = None
                        if attempt:
                            raise
                wait = arrived + latency - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                self.send_response_only(response.status, response.reason)
                head = self.command == "HEAD"  # its Content-Length is the object's, with no body
                for name, value in response.getheaders():
                    if name.lower() not in _HOP and (head or name.lower() != "content-length"):
                        self.send_header(name, value)
                if not head:
                    self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if not head:
                    started = time.monotonic()
                    view = memoryview(data)
                    while sent < len(data):
                        self.wfile.write(view[sent : sent + _CHUNK])
                        sent = min(len(data), sent + _CHUNK)
                        ahead = started + sent / bandwidth - time.monotonic()
                        if ahead > 0:
                            time.sleep(ahead)
                self.wfile.flush()
            finally:
                counters.end(sent)

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    server.request_queue_size = 128
    server.serve_forever()


def serve_moto(port: int) -> None:
    """A moto S3 server whose ranged GETs copy only the range (see the module docstring)."""
    from moto.s3.models import FakeKey
    from moto.server import ThreadedMotoServer

    plain: Any = FakeKey.__dict__["value"]  # the property itself

    def value(self: Any) -> bytes:
        cached = self.__dict__.get("_shaped_value")
        if cached is None:
            cached = self.__dict__["_shaped_value"] = plain.fget(self)
        return cached  # type: ignore[no-any-return]

    def set_value(self: Any, new: bytes) -> None:
        self.__dict__.pop("_shaped_value", None)
        plain.fset(self, new)

    FakeKey.value = property(value, set_value)  # type: ignore[method-assign,assignment]
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    threading.Event().wait()


@dataclass
class ShapedS3:
    """A running shaped S3: ``endpoint`` is shaped, ``direct`` is moto itself."""

    endpoint: str
    direct: str

    def stats(self, reset: bool = False) -> dict[str, Any]:
        """The proxy's counters since the last reset (and reset them if ``reset``)."""
        url = f"{self.endpoint}{CONTROL}{'?reset' if reset else ''}"
        with urllib.request.urlopen(url, timeout=10) as r:
            return json.loads(r.read())  # type: ignore[no-any-return]

    def reset(self) -> None:
        self.stats(reset=True)


def _wait(url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server for {url} exited with {process.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except urllib.error.HTTPError:
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{url} did not answer within 60 s")


@contextmanager
def shaped_s3(latency: float = 0.025, bandwidth: float = 90e6) -> Iterator[ShapedS3]:
    """moto and the shaping proxy, each in its own process, for the duration of the block."""
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    moto_port = _free_port()
    moto = subprocess.Popen([sys.executable, "-m", MODULE, "moto", "--port", str(moto_port)], cwd=ROOT)
    try:
        direct = f"http://127.0.0.1:{moto_port}"
        _wait(f"{direct}/moto-api/", moto)
        with shaping_proxy(direct, latency, bandwidth) as endpoint:
            yield ShapedS3(endpoint, direct)
    finally:
        moto.kill()
        moto.wait()


@contextmanager
def shaping_proxy(upstream: str, latency: float = 0.025, bandwidth: float = 90e6) -> Iterator[str]:
    """The shaping proxy alone, in its own process, in front of the S3 server at ``upstream``
    (bench/concurrency/contention.py puts it before a moto whose conditional writes are atomic); its endpoint."""
    port = _free_port()
    shape = ["--upstream", upstream, "--latency", str(latency), "--bandwidth", str(bandwidth)]
    proxy = subprocess.Popen([sys.executable, "-m", MODULE, "proxy", "--port", str(port), *shape], cwd=ROOT)
    try:
        endpoint = f"http://127.0.0.1:{port}"
        _wait(f"{endpoint}{CONTROL}", proxy)
        yield endpoint
    finally:
        proxy.kill()
        proxy.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("role", choices=["moto", "proxy"])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream", default="")
    parser.add_argument("--latency", type=float, default=0.025)
    parser.add_argument("--bandwidth", type=float, default=90e6)
    args = parser.parse_args()
    if args.role == "moto":
        serve_moto(args.port)
    else:
        serve_proxy(args.port, args.upstream, args.latency, args.bandwidth)


if __name__ == "__main__":
    main()
