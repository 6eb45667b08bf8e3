"""The catalog served over HTTP on this machine (``castable catalog serve``): the standard
library's threading HTTP server in front of :meth:`Catalog.handle`."""

from __future__ import annotations

import json
import logging
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlsplit

from castable.catalog.service import Catalog, Request

log = logging.getLogger(__name__)


def make_server(catalog: Catalog, host: str = "127.0.0.1", port: int = 8181) -> ThreadingHTTPServer:
    """A server for ``catalog`` bound to ``host:port`` (port 0: a free one); ``serve_forever()`` runs it."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _answer(self) -> None:
            url = urlsplit(self.path)
            size = int(self.headers.get("Content-Length") or 0)
            request = Request(
                method=self.command,
                path=url.path,
                query=dict(parse_qsl(url.query)),
                headers=dict(self.headers.items()),
                body=self.rfile.read(size) if size else b"",
            )
            response = catalog.handle(request)
            data = b"" if response.body is None else json.dumps(response.body).encode()
            self.send_response(response.status)
            if data:
                self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        do_GET = do_POST = do_DELETE = do_HEAD = _answer

        def log_message(self, format: str, *args: object) -> None:
            log.info("%s %s", self.address_string(), format % args)

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    return server
