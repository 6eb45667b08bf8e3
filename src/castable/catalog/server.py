"""The catalog served over HTTP on this machine (``castable catalog serve``): the ASGI
application of :mod:`castable.catalog.app` on uvicorn, which does the HTTP/1.1 framing
(``Content-Length``, chunked bodies, keep-alive) with h11.

An idle connection holds no thread (uvicorn is asynchronous; the catalog's work runs in a
bounded thread pool), a keep-alive connection closes after :data:`KEEP_ALIVE` seconds of
silence, and one that sends no request head within :data:`HEAD_TIMEOUT` seconds of opening is
closed too, which uvicorn alone does not do."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Collection
from typing import Any

import uvicorn
from starlette.applications import Starlette
from uvicorn.protocols.http.h11_impl import H11Protocol

from castable.catalog.access import Access
from castable.catalog.app import LOOPBACK, application
from castable.catalog.service import Catalog

KEEP_ALIVE = 5
"""Seconds a keep-alive connection stays open with no request."""
HEAD_TIMEOUT = 10
"""Seconds a new connection has to send its first request's head."""
MAX_CONNECTIONS = 512
"""Connections and requests in flight beyond which uvicorn answers 503."""
SHUTDOWN_GRACE = 5
"""Seconds a stopping server gives requests in flight and connections closing (a TLS client that
never answers the close) before it stops anyway."""


class _Protocol(H11Protocol):
    """uvicorn's HTTP/1.1 protocol, closing a connection that sends no request head in time."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.loop.call_later(HEAD_TIMEOUT, self._close_if_silent)

    def _close_if_silent(self) -> None:
        if self.cycle is None and not self.transport.is_closing():
            self.transport.close()


class CatalogServer:
    """``app`` served on ``host:port`` (port 0: a free one, then :attr:`port` says which). The
    socket is bound and listening at construction, so a port in use fails here, and a client
    that connects before serving starts is answered once it does."""

    def __init__(self, app: Starlette, host: str = "127.0.0.1", port: int = 8181, **options: Any) -> None:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.socket = socket.socket(family, socket.SOCK_STREAM)
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.socket.bind((host, port))
        self.socket.listen(2048)  # connections made before serving starts wait, not fail
        self.host = host
        self.port: int = self.socket.getsockname()[1]
        config = uvicorn.Config(
            app,
            http=_Protocol,
            lifespan="off",
            timeout_keep_alive=KEEP_ALIVE,
            limit_concurrency=MAX_CONNECTIONS,
            timeout_graceful_shutdown=SHUTDOWN_GRACE,
            log_config=None,
            **options,
        )
        self.server = uvicorn.Server(config)

    @property
    def scheme(self) -> str:
        return "https" if self.server.config.ssl_certfile else "http"

    def serve_forever(self) -> None:
        """Serve until :meth:`shutdown` (or, in the main thread, Ctrl-C)."""
        self.server.run(sockets=[self.socket])

    def start(self) -> threading.Thread:
        """Serve in a thread of this process, from when this returns (tests, notebooks)."""
        thread = threading.Thread(target=self.serve_forever, name="castable-catalog", daemon=True)
        thread.start()
        while not self.server.started and thread.is_alive():
            time.sleep(0.01)
        return thread

    def shutdown(self) -> None:
        """Stop serving: requests in flight are answered, then connections close."""
        self.server.should_exit = True

    def close(self) -> None:
        self.socket.close()


def make_server(
    catalog: Catalog,
    host: str = "127.0.0.1",
    port: int = 8181,
    *,
    access: Access | None = None,
    hosts: Collection[str] | None = (),
    **options: Any,
) -> CatalogServer:
    """A server of ``catalog`` on ``host:port``. ``hosts``: the names clients reach it by,
    beyond the loopback names and ``host`` itself (``None``: any, for a server on every address
    that clients reach by names it cannot know); ``options``: uvicorn's (``ssl_certfile``...)."""
    answered = None if hosts is None else {*LOOPBACK, host, *hosts}
    return CatalogServer(application(catalog, access=access, hosts=answered), host, port, **options)
