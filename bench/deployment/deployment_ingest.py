"""One architecture's ingest under one load, in a process of its own: the child side of
deployment.py's ingest latency (its docstring, part 2, says what is modelled and how).

``python -m bench.deployment.deployment_ingest SPEC`` reads the run's JSON spec (architecture,
moto endpoint, bucket, tables, concurrency, rate, seconds, batching window), runs the real ingest
handler of the tree it is started in (its cwd and the front of ``PYTHONPATH``: 66afb07's worktree
or the working tree) under that load, and writes its results beside SPEC (``.result.json``).
Not a benchmark itself.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import threading
import time
import types
import uuid
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from helpers.aws_stubs import sqs_event

from bench.common.benchlib import fmt_s, log

BATCH = 50
"""Messages an invocation takes at most (both stacks' ``batch_size``)."""
ROUTE_BATCH = 10
"""The route function's batch: the stack gives it no batching window, so at most 10 (SQS's limit then)."""
ROWS = 100
PRODUCERS = 4
DRAIN_TIMEOUT = 180.0
MAX_RETRIES = 20
"""Failed messages put back into their queues in a run, at most; after that they are given up on."""


class FunctionEnv(Mapping[str, str]):
    """``os.environ`` as one function of the per-table stack sees it: the calling thread's
    overlay (``CASTABLE_TABLE``, ``CASTABLE_LANDING``) over the process's environment."""

    local = threading.local()

    def __getitem__(self, key: str) -> str:
        overlay = getattr(self.local, "env", {})
        return overlay[key] if key in overlay else os.environ[key]

    def __iter__(self) -> Iterator[str]:
        return iter({**os.environ, **getattr(self.local, "env", {})})

    def __len__(self) -> int:
        return len({**os.environ, **getattr(self.local, "env", {})})


class Context:
    """A ``LambdaContext`` stand-in."""

    def __init__(self, function_name: str) -> None:
        self.function_name = function_name
        self.memory_limit_in_mb = 1024
        self.invoked_function_arn = f"arn:aws:lambda:us-east-1:123456789012:function:{function_name}"
        self.aws_request_id = str(uuid.uuid4())


def notification_event(bucket: str, keys: list[str]) -> dict[str, Any]:
    """66afb07's messages: an S3 object-created notification in each SQS message (the working
    tree's are EventBridge's events, as ``sqs_event`` makes them)."""
    event = sqs_event(bucket, keys)
    for record, key in zip(event["Records"], keys, strict=True):
        s3 = {"bucket": {"name": bucket}, "object": {"key": key, "size": 1, "eTag": "x"}}
        note = {"eventVersion": "2.1", "eventSource": "aws:s3", "eventName": "ObjectCreated:Put", "s3": s3}
        record["body"] = json.dumps({"Records": [note]})
    return event


class Function:
    """One Lambda function behind one SQS queue: a poller that batches (the first message, then
    up to ``BATCH`` or what arrives within ``window``) and at most ``concurrency`` invocations at once."""

    def __init__(self, run: Run, name: str, concurrency: int, env: dict[str, str] | None) -> None:
        import queue

        self.run, self.name, self.env = run, name, env or {}
        self.queue: queue.Queue[tuple[str, float]] = queue.Queue()
        self.slots = threading.Semaphore(concurrency)
        threading.Thread(target=self.poll, daemon=True, name=f"poller-{name}").start()

    def poll(self) -> None:
        import queue

        while True:
            batch = [self.queue.get()]
            deadline = time.perf_counter() + self.run.window
            while len(batch) < BATCH:
                left = deadline - time.perf_counter()
                if left <= 0:
                    break
                try:
                    batch.append(self.queue.get(timeout=left))
                except queue.Empty:
                    break
            self.slots.acquire()
            threading.Thread(target=self.invoke, args=(batch,), daemon=True).start()

    def invoke(self, batch: list[tuple[str, float]]) -> None:
        try:
            FunctionEnv.local.env = self.env
            keys = [key for key, _ in batch]
            event = self.run.event(self.run.bucket, keys)
            t0 = time.perf_counter()
            try:
                response = self.run.handler(event, Context(self.name))
                failed = {f["itemIdentifier"] for f in response.get("batchItemFailures", [])}
            except Exception as e:  # the whole batch is retried, as SQS would
                log(f"{self.name}: invocation failed: {type(e).__name__}: {e}")
                failed = {f"m{i}" for i in range(len(batch))}
            done = time.perf_counter()
            self.run.finished(self, batch, [f"m{i}" in failed for i in range(len(batch))], t0, done)
        finally:
            self.slots.release()


class Route:
    """The shared function's hop in front of its queue: a poller with no batching window (the
    stack's route function takes what is there, up to ``ROUTE_BATCH``), whose invocation runs the
    route function's own grouping (``lambdas.route.group``) on each message's event and puts it
    on the ingest queue. The hop's SQS and Lambda round trips are not modelled."""

    def __init__(self, run: Run, target: Function) -> None:
        import queue

        self.run, self.target = run, target
        self.queue: queue.Queue[tuple[str, float]] = queue.Queue()
        threading.Thread(target=self.poll, daemon=True, name="poller-route").start()

    def poll(self) -> None:
        import queue

        from lambdas.route import group

        while True:
            batch = [self.queue.get()]
            while len(batch) < ROUTE_BATCH:
                try:
                    batch.append(self.queue.get_nowait())
                except queue.Empty:
                    break
            event = self.run.event(self.run.bucket, [key for key, _ in batch])
            for record, message in zip(event["Records"], batch, strict=True):
                group(record["body"])
                self.target.queue.put(message)


class Run:
    """One architecture's ingest under one load, in this (child) process."""

    def __init__(self, spec: dict[str, Any]) -> None:
        import lambdas.ingest as ingest

        self.spec = spec
        self.bucket, self.window = spec["bucket"], spec["window"]
        self.old = spec["arch"] == "old"
        self.event = notification_event if self.old else sqs_event
        self.handler = ingest.handler
        self.module = ingest.__file__
        if self.old:  # each function's own CASTABLE_TABLE and CASTABLE_LANDING, per thread
            ingest.os = types.SimpleNamespace(environ=FunctionEnv())  # type: ignore[assignment]
        else:
            os.environ["CASTABLE_BUCKET"] = self.bucket
        self.lock = threading.Lock()
        self.latencies: list[float] = []
        self.invocations: list[tuple[int, float, int]] = []  # messages, seconds, tables
        self.retried = 0
        self.lost = 0
        self.pending = 0
        self.drained = threading.Event()

    def finished(self, fn: Function, batch: list[tuple[str, float]], failed: list[bool], t0: float, t1: float) -> None:
        tables = len({key.split("/")[1] for key, _ in batch})
        with self.lock:
            self.invocations.append((len(batch), t1 - t0, tables))
            for (key, put), bad in zip(batch, failed, strict=True):
                if bad and self.retried < MAX_RETRIES:
                    self.retried += 1
                    fn.queue.put((key, put))
                elif bad:  # given up on (counted, not timed)
                    self.lost += 1
                    self.pending -= 1
                elif put > 0:  # the warm-up file has none
                    self.latencies.append(t1 - put)
                    self.pending -= 1
            if self.pending == 0:
                self.drained.set()


def child(spec_path: Path) -> None:
    """Run one architecture under one load (see the module's docstring) and write its results
    beside ``spec_path``."""
    spec = json.loads(spec_path.read_text())
    # 66afb07's handler gives the shared Metrics object its table dimension per invocation: with
    # its functions as threads of one process, that warns (metrics are off in this run).
    warnings.filterwarnings("ignore", message="Dimension 'table' has already been added")
    import boto3
    import pyarrow as pa
    import pyarrow.parquet as pq

    import castable

    run = Run(spec)
    endpoint, bucket, names = spec["endpoint"], spec["bucket"], spec["tables"]
    options = {"endpoint_url": endpoint, "region": "us-east-1"}
    schema = pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            pa.field("category", pa.string()),
            pa.field("value", pa.float64()),
        ]
    )
    t0 = time.perf_counter()
    for name in names:
        castable.create_table(f"s3://{bucket}/tables/{name}", schema, primary_key="id", storage_options=options)
    created_s = time.perf_counter() - t0

    def parquet(start: int) -> bytes:
        ids = list(range(start, start + ROWS))
        table = pa.table(
            {
                "id": pa.array(ids, pa.int64()),
                "category": [("a", "b", "c", None)[i % 4] for i in ids],
                "value": [i * 0.5 for i in ids],
            },
            schema=schema,
        )
        buf = io.BytesIO()
        pq.write_table(table, buf)
        return buf.getvalue()

    if run.old:
        functions = {
            n: Function(
                run,
                f"ingest-{n}",
                spec["concurrency"],
                {"CASTABLE_TABLE": f"s3://{bucket}/tables/{n}", "CASTABLE_LANDING": f"s3://{bucket}/landing/{n}/"},
            )
            for n in names
        }
    else:
        shared = Function(run, "ingest", spec["concurrency"], None)
        functions = dict.fromkeys(names, Route(run, shared))
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")

    # Warm-up (not counted): one file through the first table, so imports and clients are ready.
    run.pending = 0
    key = f"landing/{names[0]}/warmup.parquet"
    s3.put_object(Bucket=bucket, Key=key, Body=parquet(10**9))
    warm = threading.Event()
    finished = run.finished

    def warm_finished(*args: Any) -> None:
        finished(*args)
        warm.set()

    run.finished = warm_finished  # type: ignore[method-assign,assignment]
    functions[names[0]].queue.put((key, 0.0))
    if not warm.wait(60) or run.retried:
        raise RuntimeError("the warm-up file was not ingested (see the log)")
    run.finished = finished  # type: ignore[method-assign]
    run.drained.clear()

    # The load: each busy table a file every 1/rate s, the tables' files spread evenly.
    rate, seconds = spec["rate"], spec["seconds"]
    schedule = []
    for t, name in enumerate(names):
        offset = t / (len(names) * rate)
        k = 0
        while offset + k / rate < seconds:
            schedule.append((offset + k / rate, name, k))
            k += 1
    schedule.sort()
    bodies = [parquet(k * ROWS) for _, _, k in schedule]
    run.pending = len(schedule)
    log(
        f"{spec['arch']}: {len(names)} tables (created in {fmt_s(created_s)}), {len(schedule)} files over {seconds:g} s"
    )
    cursor = iter(range(len(schedule)))
    cursor_lock = threading.Lock()
    late: list[float] = []
    start = time.perf_counter() + 0.2

    def produce() -> None:
        while True:
            with cursor_lock:
                i = next(cursor, None)
            if i is None:
                return
            at, name, k = schedule[i]
            wait = start + at - time.perf_counter()
            if wait > 0:
                time.sleep(wait)
            else:
                late.append(-wait)
            key = f"landing/{name}/f{k:05d}.parquet"
            s3.put_object(Bucket=bucket, Key=key, Body=bodies[i])
            functions[name].queue.put((key, time.perf_counter()))

    producers = [threading.Thread(target=produce, daemon=True) for _ in range(PRODUCERS)]
    for p in producers:
        p.start()
    for p in producers:
        p.join()
    produced_s = time.perf_counter() - start
    drained = run.drained.wait(DRAIN_TIMEOUT) or run.pending == 0
    total_s = time.perf_counter() - start
    time.sleep(0.5)
    landing_left = s3.list_objects_v2(Bucket=bucket, Prefix="landing/").get("KeyCount", 0)
    rows = sum(
        castable.open_table(f"s3://{bucket}/tables/{n}", storage_options=options).scan().to_arrow().num_rows
        for n in names
    )
    with run.lock:
        result = {
            "arch": spec["arch"],
            "tables": len(names),
            "files": len(schedule),
            "latencies": list(run.latencies),
            "invocations": list(run.invocations),
            "retried": run.retried,
            "lost": run.lost,
            "drained": drained,
            "pending": run.pending,
            "landing_left": landing_left,
            "rows": rows,
            "rows_expected": (len(schedule) + 1) * ROWS,
            "produced_s": produced_s,
            "total_s": total_s,
            "late_max_s": max(late, default=0.0),
            "created_s": created_s,
            "handler": run.module,
            "castable": castable.__file__,
        }
    spec_path.with_suffix(".result.json").write_text(json.dumps(result))
    os._exit(0)  # the pollers are daemon threads blocked on their queues


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("spec", type=Path, help="the run's JSON spec; its results go beside it")
    child(parser.parse_args().spec)


if __name__ == "__main__":
    main()
