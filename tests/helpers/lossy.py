"""A lossy network between castable and S3, injected where production injects it: in the SDK's
send (``botocore.endpoint.Endpoint._send``), below botocore's retries.

- ``lose``: the server applies a PUT, POST or DELETE and its answer is replaced by a closed
  connection (a reset, a frozen Lambda); botocore sends the request again, as in production, and
  a conditional PUT repeated this way answers 412.
- ``slow_down``: the request is answered 503 SlowDown before it reaches the server.
- ``reset_body``: a GET's connection breaks after its headers, while its body is read (botocore
  retries a request until its headers only).
- ``slow``: the answer comes ``delay`` seconds late (a slow S3 node, a long GC pause).

Only castable's S3 requests are hit (moto serves the other services on the same endpoint): a
Distributed Map's ItemReader and ResultWriter, which moto's Step Functions interpreter runs in the
test process, are Step Functions' own S3 access, which AWS performs and retries itself. Installed per
process (``install``, or ``network`` for a block), so multi-process tests call it first thing in
each worker; ``injected`` counts what was injected, so a test can show its faults happened.
"""

from __future__ import annotations

import random
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType
from typing import Any

from botocore.awsrequest import AWSPreparedRequest, AWSResponse
from botocore.endpoint import Endpoint
from botocore.exceptions import ConnectionClosedError
from urllib3.exceptions import ProtocolError

WRITES = ("PUT", "POST", "DELETE")


@dataclass(frozen=True)
class Faults:
    """Probabilities per request (picklable, for worker processes)."""

    lose: float = 0.0
    slow_down: float = 0.0
    reset_body: float = 0.0
    slow: float = 0.0
    delay: float = 0.5
    seed: int | None = None


injected: Counter[str] = Counter()
"""What this process injected so far, by kind."""
_lock = threading.Lock()
_real_send = Endpoint._send


class _SlowDownBody:
    """The raw body of a 503 SlowDown answer."""

    def __init__(self) -> None:
        self.body = b"<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>"

    def stream(self, *args: Any, **kwargs: Any) -> Iterator[bytes]:
        yield self.body


class _BrokenBody:
    """A GET's body whose connection breaks on the first read."""

    def __init__(self, raw: Any) -> None:
        self._raw = raw

    def read(self, *args: Any, **kwargs: Any) -> bytes:
        self._raw.close()
        raise ProtocolError("Connection broken: injected reset while reading the body")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._raw, name)


def _signed_for(request: AWSPreparedRequest, service: str) -> bool:
    """Whether the request is signed for ``service`` (moto serves every service on one endpoint)."""
    signature = request.headers.get("Authorization", "")
    text = signature.decode() if isinstance(signature, bytes) else str(signature)
    return f"/{service}/aws4_request" in text


STEP_FUNCTIONS_OWN_S3 = ("/state_map/item_reader/", "/state_map/result_writer/")
"""Where moto's interpreter reads a Distributed Map's items and writes its results."""


_spared = threading.local()


@contextmanager
def spared() -> Iterator[None]:
    """Requests this thread makes inside the block cross no faults: a test's own producer (the
    system that lands files for ingestion) is not castable, and its retries are not castable's."""
    _spared.on = True
    try:
        yield
    finally:
        _spared.on = False


def _from_step_functions() -> bool:
    """Whether this request is Step Functions' own (a Distributed Map's ItemReader or ResultWriter)."""
    frame: FrameType | None = sys._getframe(2)
    while frame is not None:
        if any(part in frame.f_code.co_filename for part in STEP_FUNCTIONS_OWN_S3):
            return True
        frame = frame.f_back
    return False


def _count(kind: str) -> None:
    with _lock:
        injected[kind] += 1


def lossy_send(
    faults: Faults, decide: Callable[[str, AWSPreparedRequest], bool], service: str = "s3"
) -> Callable[..., AWSResponse]:
    """A replacement for ``Endpoint._send``: ``decide(kind, request)`` says whether a fault of
    ``kind`` hits this request of ``service``."""

    def send(endpoint: Endpoint, request: AWSPreparedRequest) -> AWSResponse:
        if not _signed_for(request, service) or getattr(_spared, "on", False) or _from_step_functions():
            return _real_send(endpoint, request)
        if decide("slow_down", request):
            _count("slow_down")
            return AWSResponse(request.url, 503, {"Content-Type": "application/xml"}, _SlowDownBody())
        response = _real_send(endpoint, request)
        if decide("slow", request):
            _count("slow")
            time.sleep(faults.delay)
        ok = response.status_code < 300
        if ok and request.method in WRITES and decide("lose", request):
            _count("lose")
            raise ConnectionClosedError(endpoint_url=request.url)
        if ok and request.method == "GET" and decide("reset_body", request):
            _count("reset_body")
            response.raw = _BrokenBody(response.raw)
        return response

    return send


def install(faults: Faults) -> None:
    """Make every S3 request of this process go through ``faults`` (for the life of the process)."""
    Endpoint._send = _random_send(faults)  # type: ignore[method-assign]


@contextmanager
def network(faults: Faults) -> Iterator[Counter[str]]:
    """Every request inside the block goes through ``faults``; yields ``injected``."""
    Endpoint._send = _random_send(faults)  # type: ignore[method-assign]
    try:
        yield injected
    finally:
        Endpoint._send = _real_send  # type: ignore[method-assign]


def _random_send(faults: Faults) -> Callable[..., AWSResponse]:
    rng = random.Random(faults.seed)
    chances = {"lose": faults.lose, "slow_down": faults.slow_down, "reset_body": faults.reset_body, "slow": faults.slow}

    def decide(kind: str, request: AWSPreparedRequest) -> bool:
        with _lock:
            return rng.random() < chances[kind]

    return lossy_send(faults, decide)


@contextmanager
def losing(
    match: Callable[[str, str], bool], *, times: int = 1, kind: str = "lose", service: str = "s3"
) -> Iterator[Counter[str]]:
    """Inject ``kind`` on the first ``times`` requests of ``service`` for which ``match(method,
    url)`` holds, inside the block only; yields ``injected``."""
    left = times

    def decide(k: str, request: AWSPreparedRequest) -> bool:
        nonlocal left
        with _lock:
            if k == kind and left > 0 and match(request.method or "", request.url or ""):
                left -= 1
                return True
            return False

    Endpoint._send = lossy_send(Faults(), decide, service)  # type: ignore[method-assign]
    try:
        yield injected
    finally:
        Endpoint._send = _real_send  # type: ignore[method-assign]


def run_lossy(faults: Faults, fn: Callable[..., Any], *args: Any) -> Any:
    """In a worker process: install ``faults``, run ``fn(*args)``, return its result and what was
    injected (so the test sees that the faults happened)."""
    install(faults)
    return fn(*args), dict(injected)
