"""S3 servers on 127.0.0.1 for tests and benchmarks: moto (with S3's atomic conditional writes),
LocalStack's own S3 provider, and s3rver (which ignores conditional writes).

Shared by ``tests/conftest.py`` and ``bench/``; each server is a context manager yielding its
endpoint URL and stops with it.
"""

from __future__ import annotations

import functools
import logging
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@functools.cache
def serialize_moto_object_writes() -> None:
    """Run moto's object PUT, POST and DELETE handlers under one lock (once per process).

    moto checks ``If-None-Match``/``If-Match`` and then stores with no lock, so two racing
    conditional PUTs can both succeed; real S3 never allows that. Without this, a concurrency
    test on moto could fail for moto's reasons, or pass while proving nothing.
    """
    from moto.s3.responses import S3Response

    lock = threading.Lock()

    def under_lock(method: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(method)
        def locked(*args: Any, **kwargs: Any) -> Any:
            with lock:
                return method(*args, **kwargs)

        return locked

    for name in ("_key_response_put", "_key_response_post", "_key_response_delete"):
        setattr(S3Response, name, under_lock(getattr(S3Response, name)))


@contextmanager
def moto_s3() -> Iterator[str]:
    """A moto S3 server in this process (threads), with atomic conditional writes."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    serialize_moto_object_writes()
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()
