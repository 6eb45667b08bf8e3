"""castable's Iceberg REST catalog served on a free port for tests, with pyiceberg as its client."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest
from pyiceberg.catalog.rest import RestCatalog

import castable
from castable.catalog import Access, Catalog, Warehouse
from castable.catalog.server import make_server


class Served:
    """A catalog served on a free port over ``warehouse`` (with ``access``, tokens needed), and
    pyiceberg clients of it."""

    def __init__(
        self, warehouse: str, storage_options: dict[str, str] | None = None, access: Access | None = None
    ) -> None:
        self.warehouse = warehouse
        self.options = storage_options
        self.server = make_server(Catalog(Warehouse.at(warehouse, storage_options)), port=0, access=access)
        self.uri = f"http://127.0.0.1:{self.server.port}"
        self.thread = self.server.start()

    def client(self, **auth: str) -> RestCatalog:
        """A pyiceberg client, with ``auth`` (``token=`` or ``credential=``) as its properties,
        and the token endpoint named as pyiceberg's docs ask."""
        props = {"uri": self.uri, **auth}
        if auth:
            props["oauth2-server-uri"] = f"{self.uri}/v1/oauth/tokens"
        if self.options:
            props |= {"s3.endpoint": self.options["endpoint_url"], "s3.region": "us-east-1"}
            props |= {"s3.access-key-id": "testing", "s3.secret-access-key": "testing"}
        return RestCatalog("castable", **props)

    def castable(self, *path: str) -> castable.Table:
        return castable.open_table("/".join([self.warehouse.rstrip("/"), *path]), storage_options=self.options)

    def raw(self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        sent = {"Content-Type": "application/json"} | (headers or {})
        request = urllib.request.Request(f"{self.uri}{path}", data=data, method=method, headers=sent)
        try:
            with urllib.request.urlopen(request) as answer:
                text = answer.read()
                return answer.status, json.loads(text) if text else None
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

    def close(self) -> None:
        self.server.shutdown()
        self.thread.join(timeout=10)
        self.server.close()


class Held(Exception):
    """Stops pyiceberg after it built a commit, which the test sends itself."""


def held_commit(table: Any, write: Any) -> dict[str, Any]:
    """The body of the commit pyiceberg sends for ``write(table)``, not sent."""
    session = table.catalog._session
    real = session.post

    def holding(url: str, *args: Any, **kwargs: Any) -> Any:
        raise Held(kwargs.get("data") or b"")

    session.post = holding
    try:
        with pytest.raises(Held) as held:
            write(table)
    finally:
        session.post = real
    return json.loads(held.value.args[0])  # type: ignore[no-any-return]
