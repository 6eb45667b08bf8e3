"""The catalog's HTTP stack probed as a fuzzer or an attacker would: raw bytes on a socket,
bodies that are not what they claim, requests a browser page could send, and bodies the spec's
models refuse. Each gets a 4xx with the spec's error model (or, for framing h11 cannot parse,
a 400 and a closed connection), the server goes on answering, and the warehouse is unchanged."""

from __future__ import annotations

import contextlib
import hashlib
import json
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from helpers.rest_catalog import Served, held_commit

import castable.catalog.server as catalog_server

ROWS = pa.table({"id": pa.array([1, 2, 3], pa.int64())})


def exchange(served: Served, data: bytes, *, wait: float = 5.0) -> bytes:
    """What the server sends back for ``data`` on a fresh connection, until it closes the
    connection or ``wait`` seconds pass with nothing more. ``data`` is sent while the answer is
    read, as a client does: a server may answer (413) before the body is all sent."""
    with socket.create_connection(("127.0.0.1", served.server.port), timeout=wait) as conn:

        def send() -> None:
            with contextlib.suppress(OSError):
                conn.sendall(data)

        sender = threading.Thread(target=send, daemon=True)
        sender.start()
        got = b""
        with contextlib.suppress(TimeoutError, ConnectionResetError):
            while chunk := conn.recv(65536):
                got += chunk
        sender.join(timeout=wait)
    return got


def request(method: str, path: str, body: bytes = b"", **headers: str) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", "Connection: close"]
    lines += [f"{k.replace('_', '-')}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def status(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1])


def error(answer: bytes) -> dict[str, Any]:
    return json.loads(answer.split(b"\r\n\r\n", 1)[1])["error"]  # type: ignore[no-any-return]


def digest(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.rglob("*") if p.is_file()
    }


def still_answers(served: Served) -> None:
    assert served.raw("GET", "/v1/config")[0] == 200


@pytest.mark.parametrize(
    ("length", "expected"),
    [("abc", 400), ("-1", 400), ("1000000000000", 413), ("12, 13", 400)],
)
def test_a_content_length_that_lies_is_refused_before_any_body_is_read(
    served: Served, length: str, expected: int
) -> None:
    warehouse = Path(served.warehouse)
    before = digest(warehouse)
    started = time.monotonic()
    answer = exchange(
        served,
        request(
            "POST", "/v1/namespaces", b'{"namespace": ["x"]}', Content_Type="application/json", Content_Length=length
        ),
    )
    assert status(answer) == expected, answer[:300]
    assert time.monotonic() - started < 4, "the server waited for a body that was never coming"
    if expected == 413:
        assert error(answer)["code"] == 413 and "8388608" in error(answer)["message"]
    assert digest(warehouse) == before
    still_answers(served)


def test_a_chunked_body_is_read_as_the_body_not_as_a_second_request(served: Served) -> None:
    body = b'{"namespace": ["chunked"]}'
    chunked = f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n"
    answer = exchange(
        served, request("POST", "/v1/namespaces", chunked, Content_Type="application/json", Transfer_Encoding="chunked")
    )
    assert status(answer) == 200 and answer.count(b"HTTP/1.1 ") == 1, answer
    assert served.client().list_namespaces() == [("chunked",)]


def test_a_chunked_body_larger_than_the_limit_is_refused_while_it_comes(served: Served) -> None:
    piece = b"x" * 1_000_000
    chunks = b"".join(f"{len(piece):x}\r\n".encode() + piece + b"\r\n" for _ in range(9)) + b"0\r\n\r\n"
    answer = exchange(
        served, request("POST", "/v1/namespaces", chunks, Content_Type="application/json", Transfer_Encoding="chunked")
    )
    assert status(answer) == 413
    still_answers(served)


def test_idle_connections_hold_nothing_and_are_closed(served: Served, monkeypatch: pytest.MonkeyPatch) -> None:
    """100 connections that never send a request: a client is still answered at once, and each
    idle one is closed once its time for a request head is up."""
    monkeypatch.setattr(catalog_server, "HEAD_TIMEOUT", 1)
    idle = [socket.create_connection(("127.0.0.1", served.server.port)) for _ in range(100)]
    try:
        started = time.monotonic()
        still_answers(served)
        assert time.monotonic() - started < 2
        time.sleep(1.5)
        for conn in idle:
            conn.settimeout(2)
            assert conn.recv(1) == b"", "an idle connection was left open"
    finally:
        for conn in idle:
            conn.close()


def test_a_method_the_spec_does_not_have_is_405_with_the_error_model(served: Served) -> None:
    answer = exchange(
        served, request("PUT", "/v1/namespaces", b"{}", Content_Type="application/json", Content_Length="2")
    )
    assert status(answer) == 405 and error(answer)["code"] == 405


def test_a_post_a_browser_page_could_send_is_refused(served: Served) -> None:
    """text/plain (and form) POSTs need no CORS preflight: the catalog takes JSON only, so a page
    cannot create or drop anything through a browser on the same machine."""
    for media in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"):
        body = b'{"namespace": ["page"]}'
        answer = exchange(
            served, request("POST", "/v1/namespaces", body, Content_Type=media, Content_Length=str(len(body)))
        )
        assert status(answer) == 400 and "application/json" in error(answer)["message"], answer
    assert served.client().list_namespaces() == []


def test_a_foreign_host_is_refused(served: Served) -> None:
    """DNS rebinding: a page at evil.example resolved to 127.0.0.1 sends Host: evil.example."""
    raw = request("GET", "/v1/namespaces").replace(b"Host: 127.0.0.1", b"Host: evil.example:8181")
    answer = exchange(served, raw)
    assert status(answer) == 400 and "evil.example" in error(answer)["message"]
    assert status(exchange(served, request("GET", "/v1/namespaces").replace(b"127.0.0.1", b"localhost:1"))) == 200


@pytest.mark.parametrize(
    "body",
    [
        {"namespace": [None]},
        {"namespace": "abc"},
        {"namespace": 123},
        {"namespace": []},
        {"namespace": ["a"], "properties": ["x"]},
        {"namespace": ["a"], "properties": {"k": 1}},
        {"namespace": ["a"], "properties": {"k": "v" * 70_000}},
        {"namespace": ["a"], "properties": {f"k{i}": "v" for i in range(1001)}},
        {"namespace": [f"l{i}" for i in range(17)]},
    ],
)
def test_a_namespace_body_the_spec_refuses_is_400_and_nothing_is_made(served: Served, body: dict[str, Any]) -> None:
    code, answer = served.raw("POST", "/v1/namespaces", body)
    assert code == 400 and answer["error"]["type"] == "BadRequestException", answer
    assert "None" not in served.client().list_namespaces() and served.client().list_namespaces() == []
    assert list(Path(served.warehouse).iterdir()) == []


def test_property_updates_the_spec_refuses_are_400(served: Served) -> None:
    served.client().create_namespace("db")
    for body in ({"updates": {"k": 7}}, {"removals": "k"}, {"updates": ["k"]}):
        code, answer = served.raw("POST", "/v1/namespaces/db/properties", body)
        assert code == 400, answer
    assert served.client().load_namespace_properties("db") == {}


def test_a_tables_own_folders_are_not_namespaces(served: Served) -> None:
    cat = served.client()
    cat.create_namespace("db")
    cat.create_table("db.t", schema=ROWS.schema).append(ROWS)
    for path in ("/v1/namespaces/db%1Ft%1Fdata", "/v1/namespaces/db%1Ft"):
        assert served.raw("GET", path)[0] == 404
        assert served.raw("DELETE", path)[0] == 404
    assert served.raw("GET", "/v1/namespaces?parent=db%1Ft")[0] == 404
    assert served.castable("db", "t").count() == 3


def test_properties_that_send_writes_elsewhere_are_refused(served: Served, tmp_path: Path) -> None:
    cat = served.client()
    cat.create_namespace("db")
    table = cat.create_table("db.t", schema=ROWS.schema)
    for key in ("write.data.path", "write.metadata.path", "write.object-storage.path"):
        with pytest.raises(Exception, match=key):
            table.transaction().set_properties({key: f"file://{tmp_path}/elsewhere"}).commit_transaction()
        schema = {
            "type": "struct",
            "schema-id": 0,
            "fields": [{"id": 1, "name": "id", "type": "long", "required": False}],
        }
        code, answer = served.raw(
            "POST", "/v1/namespaces/db/tables", {"name": "u", "schema": schema, "properties": {key: "/etc"}}
        )
        assert code == 400 and key in answer["error"]["message"]
    assert key not in cat.load_table("db.t").properties and not cat.table_exists("db.u")


def test_a_commit_naming_a_manifest_list_outside_the_table_is_refused_as_a_refusal(
    served: Served, tmp_path: Path
) -> None:
    """400, which Java's client reports as a refused commit (CommitFailed or BadRequest), never
    500, which it reports as "commit state unknown"."""
    cat = served.client()
    cat.create_namespace("db")
    table = cat.create_table("db.t", schema=ROWS.schema)
    commit = held_commit(table, lambda t: t.append(ROWS))
    for update in commit["updates"]:
        if update["action"] == "add-snapshot":
            update["snapshot"]["manifest-list"] = f"file://{tmp_path}/elsewhere/snap.avro"
    code, answer = served.raw("POST", "/v1/namespaces/db/tables/t", commit)
    assert code == 400 and "is not under the table's location" in answer["error"]["message"], answer
    assert served.castable("db", "t").version == 0


def test_a_nested_field_default_is_a_client_error(served: Served) -> None:
    served.client().create_namespace("db")
    field = {
        "id": 1,
        "name": "s",
        "required": False,
        "write-default": {"a": 1},
        "type": {"type": "struct", "fields": [{"id": 2, "name": "a", "type": "long", "required": False}]},
    }
    schema = {"type": "struct", "schema-id": 0, "fields": [field]}
    code, answer = served.raw("POST", "/v1/namespaces/db/tables", {"name": "t", "schema": schema})
    assert 400 <= code < 500, answer
    assert not served.client().table_exists("db.t")


def test_table_properties_past_the_bounds_are_refused(served: Served) -> None:
    """A table's properties are held to the namespace's bounds: 1,000 of them, values of 64 KiB."""
    cat = served.client()
    cat.create_namespace("db")
    cat.create_table("db.t", schema=ROWS.schema)
    for props in ({"k": "v" * 70_000}, {f"k{i}": "v" for i in range(1001)}):
        body = {"requirements": [], "updates": [{"action": "set-properties", "updates": props}]}
        code, answer = served.raw("POST", "/v1/namespaces/db/tables/t", body)
        assert code == 400 and "properties" in answer["error"]["message"], answer
    assert "k" not in cat.load_table("db.t").properties
