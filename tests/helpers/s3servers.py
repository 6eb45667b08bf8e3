"""S3 servers on 127.0.0.1 for tests and benchmarks: moto (with S3's atomic conditional writes),
LocalStack's own S3 provider, and s3rver (which ignores conditional writes).

Shared by ``tests/conftest.py`` and ``bench/common/benchlib.py``; each server is a context manager
yielding its endpoint URL and stops with it, and ``new_bucket`` makes a bucket on one.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import signal
import socket
import subprocess
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def new_bucket(endpoint: str, *, versioning: str | None = None, lock: bool = False, **credentials: Any) -> str:
    """A fresh bucket on the S3 server at ``endpoint``; ``versioning`` ("Enabled", "Suspended")
    sets its versioning, ``lock`` creates it with Object Lock (which enables versioning)."""
    import boto3

    name = f"castable-{uuid.uuid4().hex[:12]}"
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", **credentials)
    s3.create_bucket(Bucket=name, **({"ObjectLockEnabledForBucket": True} if lock else {}))
    if versioning is not None:
        s3.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": versioning})
    return name


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


def seed_moto_objects(bucket: str, objects: Iterable[tuple[str, bytes]]) -> None:
    """Store ``objects`` (key, bytes) in a bucket of the in-process moto server directly, as
    if each had been PUT: test setup of thousands of objects, which one by one over HTTP
    (serialised by :func:`serialize_moto_object_writes`) would take minutes."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends

    backend = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
    for key, data in objects:
        backend.put_object(bucket, key, data)


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


def _stop(process: subprocess.Popen[bytes]) -> None:
    """End a server and everything it started (it runs in a session of its own)."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@contextmanager
def _server(
    command: list[str], env: dict[str, str], ready: Callable[[bytes], bool], url: str, log: Path, timeout: float
) -> Iterator[None]:
    """Run ``command`` until ``url`` answers 200 with a body ``ready`` accepts (or fail with the
    log's tail), yield, stop it."""
    with open(log, "wb") as out:
        process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + timeout
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"{command[0]} exited with {process.returncode}:\n{log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(url, timeout=2) as response:
                    if response.status == 200 and ready(response.read()):
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{command[0]} did not answer within {timeout:g} s:\n{log.read_text()[-3000:]}")
            time.sleep(0.25)
        yield
    finally:
        _stop(process)


@contextmanager
def localstack_s3(python: Path, workdir: Path, timeout: float = 180.0) -> Iterator[str]:
    """LocalStack's own S3 provider (not moto's), without Docker: ``python -m localstack.runtime.main``
    from a venv with ``localstack-core[base-runtime]``, bound to 127.0.0.1."""
    port = free_port()
    env = {
        **os.environ,
        "SERVICES": "s3",
        "GATEWAY_LISTEN": f"127.0.0.1:{port}",
        "GATEWAY_SERVER": "hypercorn",  # the default gateway binds 0.0.0.0 whatever GATEWAY_LISTEN says
        "EAGER_SERVICE_LOADING": "1",
        "DNS_ADDRESS": "0",
        "SKIP_SSL_CERT_DOWNLOAD": "1",
        "DISABLE_EVENTS": "1",
        "LOCALSTACK_VOLUME_DIR": str(workdir / "volume"),
        "FILESYSTEM_ROOT": str(workdir / "volume" / "fs"),
    }
    endpoint = f"http://127.0.0.1:{port}"
    command = [str(python), "-m", "localstack.runtime.main"]

    def s3_running(health: bytes) -> bool:
        return json.loads(health).get("services", {}).get("s3") in ("running", "available")

    with _server(command, env, s3_running, f"{endpoint}/_localstack/health", workdir / "localstack.log", timeout):
        yield endpoint


S3RVER_KEY = "S3RVER"
"""s3rver's fixed access key and secret."""


@contextmanager
def s3rver(binary: Path, workdir: Path, timeout: float = 60.0) -> Iterator[str]:
    """s3rver (npm), which accepts If-None-Match and If-Match and ignores both: the reference
    for a store that breaks the commit protocol. Credentials: ``S3RVER_KEY`` for both."""
    port = free_port()
    data = workdir / "s3rver"
    data.mkdir(parents=True, exist_ok=True)
    command = [str(binary), "-d", str(data), "-a", "127.0.0.1", "-p", str(port), "--silent"]
    command.append("--allow-mismatched-signatures")
    endpoint = f"http://127.0.0.1:{port}"
    with _server(command, dict(os.environ), lambda _: True, f"{endpoint}/", workdir / "s3rver.log", timeout):
        yield endpoint
