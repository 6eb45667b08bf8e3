"""The Iceberg REST catalog's routes over a :class:`~castable.catalog.warehouse.Warehouse`: one
implementation, which the ASGI application (:mod:`castable.catalog.app`, served locally and on
Lambda) calls with a request's method, path, query, headers, body and principal. Bodies are
validated by the spec's models (:mod:`castable.catalog.models`) before use, and each route says
whether it changes the catalog, so a principal's access is checked in one place."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, unquote_plus

from pyiceberg.catalog.rest import RegisterTableRequest
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC, assign_fresh_partition_spec_ids
from pyiceberg.schema import assign_fresh_schema_ids
from pyiceberg.table.metadata import new_table_metadata
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER, assign_fresh_sort_order_ids
from pyiceberg.table.update import AssertCreate

import castable.catalog.commits as commits
from castable.catalog.access import Principal
from castable.catalog.errors import (
    BadRequestError,
    NoSuchNamespaceError,
    NoSuchTableError,
    RouteNotFoundError,
    UnsupportedError,
    answer_for,
)
from castable.catalog.metadata import commit_result, load_result, stored_properties
from castable.catalog.models import (
    CreateNamespaceRequest,
    TableChanges,
    UpdateNamespacePropertiesRequest,
    commit_table_request,
    create_table_request,
    parsed,
)
from castable.catalog.schemas import arrow_schema, partition_fields, sort_fields
from castable.catalog.warehouse import Namespace, Warehouse
from castable.store import canonical_location

SEPARATOR = "\x1f"
"""What joins a namespace's levels in a path (``%1F``, the spec's default)."""
ENDPOINTS = [
    "GET /v1/{prefix}/namespaces",
    "POST /v1/{prefix}/namespaces",
    "GET /v1/{prefix}/namespaces/{namespace}",
    "HEAD /v1/{prefix}/namespaces/{namespace}",
    "DELETE /v1/{prefix}/namespaces/{namespace}",
    "POST /v1/{prefix}/namespaces/{namespace}/properties",
    "POST /v1/{prefix}/namespaces/{namespace}/register",
    "GET /v1/{prefix}/namespaces/{namespace}/tables",
    "POST /v1/{prefix}/namespaces/{namespace}/tables",
    "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "HEAD /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/metrics",
    "POST /v1/{prefix}/transactions/commit",
]


@dataclass(frozen=True)
class Request:
    """One HTTP request as the catalog reads it. ``principal``: who asks, as the server
    authenticated them; ``None`` where the server checks no one (served without authentication,
    or behind API Gateway, whose IAM authorizes each request)."""

    method: str
    path: str
    query: Mapping[str, str]
    headers: Mapping[str, str]
    body: bytes = b""
    principal: Principal | None = None

    def json(self) -> dict[str, Any]:
        """The body, which every route that takes one needs as a JSON object."""
        try:
            doc = json.loads(self.body or b"{}")
        except ValueError as e:
            raise BadRequestError(f"the request body is not JSON: {e}") from e
        except RecursionError:
            raise BadRequestError("the request body nests too deep") from None
        if not isinstance(doc, dict):
            raise BadRequestError(f"the request body must be a JSON object, not {type(doc).__name__}")
        return doc

    def header(self, name: str) -> str | None:
        return next((v for k, v in self.headers.items() if k.lower() == name.lower()), None)


@dataclass(frozen=True)
class Response:
    """The status and JSON body (``None``: no body) of an answer."""

    status: int
    body: Any = None


Handler = Callable[["Catalog", Request, list[str]], Response]
_ROUTES: list[tuple[str, re.Pattern[str], bool, Handler]] = []


def _route(method: str, pattern: str, *, writes: bool = False) -> Callable[[Handler], Handler]:
    """Register a route; ``writes``: it changes the catalog (a read-only principal is refused).
    A route under ``namespaces/{namespace}`` is checked against that namespace; the others that
    name namespaces in their bodies check them themselves."""

    def register(handler: Handler) -> Handler:
        _ROUTES.append((method, re.compile(f"/v1/{pattern}"), writes, handler))
        return handler

    return register


class Catalog:
    """The catalog of the tables under one warehouse."""

    def __init__(self, warehouse: Warehouse) -> None:
        self.warehouse = warehouse

    def handle(self, request: Request) -> Response:
        """The answer to ``request``: a route's, or the Iceberg error body of what it raised."""
        path = request.path.split("?", 1)[0].rstrip("/")
        try:
            for method, pattern, writes, handler in _ROUTES:
                found = pattern.fullmatch(path)
                if found and (method == request.method or (method == "GET" and request.method == "HEAD")):
                    groups = [unquote_plus(g) for g in found.groups()]  # Java's client sends ' ' as '+'
                    if request.principal is not None:
                        request.principal.check(_namespace(groups[0]) if groups else None, writes)
                    return handler(self, request, groups)
            raise RouteNotFoundError(f"no route {request.method} {path}")
        except Exception as e:
            status, body = answer_for(e)
            return Response(status, body)

    # ------------------------------------------------------------------ config

    @_route("GET", "config")
    def config(self, request: Request, _: list[str]) -> Response:
        return Response(200, {"defaults": {}, "overrides": {}, "endpoints": ENDPOINTS})

    # --------------------------------------------------------------- namespaces

    @_route("GET", "namespaces")
    def list_namespaces(self, request: Request, _: list[str]) -> Response:
        parent = self._parent(request.query.get("parent"))
        found = self.warehouse.namespaces(parent)
        if request.principal is not None:
            found = [ns for ns in found if request.principal.sees(ns)]
        return Response(200, {"namespaces": [list(ns) for ns in found]})

    def _parent(self, given: str | None) -> Namespace:
        """The namespace a listing names as its ``parent``: levels joined by the unit separator,
        as the spec says and Java's client sends them. pyiceberg (0.11) %-encodes each level
        before its HTTP layer encodes the query again; a parent that names no namespace and
        holds %-escapes is therefore read decoded once more, if that names one."""
        if not given:
            return ()
        parent = _namespace(given)
        decoded = tuple(unquote(level) for level in parent)
        if decoded != parent and all(decoded):
            try:
                self.warehouse.properties(parent)
            except (NoSuchNamespaceError, BadRequestError):
                return decoded
        return parent

    @_route("POST", "namespaces", writes=True)
    def create_namespace(self, request: Request, _: list[str]) -> Response:
        asked = parsed(CreateNamespaceRequest, request.json())
        namespace = tuple(asked.namespace)
        if request.principal is not None:
            request.principal.check(namespace, writes=True)
        try:
            properties = self.warehouse.create_namespace(namespace, asked.properties)
        except NoSuchNamespaceError as e:  # the spec answers a create with 400, not 404
            raise BadRequestError(f"{e}: create it first") from e
        return Response(200, {"namespace": list(namespace), "properties": properties})

    @_route("GET", "namespaces/([^/]+)")
    def load_namespace(self, request: Request, groups: list[str]) -> Response:
        namespace = _namespace(groups[0])
        properties = self.warehouse.properties(namespace)
        if request.method == "HEAD":
            return Response(204)
        return Response(200, {"namespace": list(namespace), "properties": properties})

    @_route("DELETE", "namespaces/([^/]+)", writes=True)
    def drop_namespace(self, request: Request, groups: list[str]) -> Response:
        self.warehouse.drop_namespace(_namespace(groups[0]))
        return Response(204)

    @_route("POST", "namespaces/([^/]+)/properties", writes=True)
    def update_namespace(self, request: Request, groups: list[str]) -> Response:
        asked = parsed(UpdateNamespacePropertiesRequest, request.json())
        updated, removed, missing = self.warehouse.update_properties(
            _namespace(groups[0]), asked.removals, asked.updates
        )
        return Response(200, {"updated": updated, "removed": removed, "missing": missing})

    @_route("POST", "namespaces/([^/]+)/register", writes=True)
    def register_table(self, request: Request, groups: list[str]) -> Response:
        """Bring back a table dropped with its files kept (castable creates its tables; it
        registers no other)."""
        asked = parsed(RegisterTableRequest, {"overwrite": False, **request.json()})
        if asked.overwrite:
            raise BadRequestError("register with overwrite is refused: a castable table is never replaced by another")
        table = self.warehouse.register(_namespace(groups[0]), asked.name, asked.metadata_location)
        return Response(200, load_result(table))

    # ------------------------------------------------------------------- tables

    @_route("GET", "namespaces/([^/]+)/tables")
    def list_tables(self, request: Request, groups: list[str]) -> Response:
        namespace = _namespace(groups[0])
        names = self.warehouse.tables(namespace)
        return Response(200, {"identifiers": [{"namespace": list(namespace), "name": n} for n in names]})

    @_route("POST", "namespaces/([^/]+)/tables", writes=True)
    def create_table(self, request: Request, groups: list[str]) -> Response:
        namespace = _namespace(groups[0])
        created = create_table_request(request.json())
        properties = dict(created.properties)
        if properties.pop("format-version", "2") != "2":
            raise BadRequestError(
                "castable publishes Iceberg format version 2: create the table without format-version"
            )
        schema = assign_fresh_schema_ids(created.table_schema)  # as Iceberg's catalogs do
        try:  # both refuse a field whose source the schema lacks with a ValueError
            spec = (
                UNPARTITIONED_PARTITION_SPEC
                if created.partition_spec is None
                else assign_fresh_partition_spec_ids(created.partition_spec, created.table_schema, schema)
            )
            order = (
                UNSORTED_SORT_ORDER
                if created.write_order is None
                else assign_fresh_sort_order_ids(created.write_order, created.table_schema, schema)
            )
        except ValueError as e:
            raise BadRequestError(f"the partition spec or sort order names no column of the schema: {e}") from None
        location = self.warehouse.location((*namespace, created.name))
        if created.location is not None and canonical_location(created.location).rstrip("/") != location:
            raise BadRequestError(f"a table of this catalog is at {location}, not {created.location}")
        if created.stage_create:  # nothing is written: the commit with assert-create creates it
            self.warehouse.check_absent(namespace, created.name)
            staged = new_table_metadata(schema, spec, order, location, properties)
            return Response(200, {"metadata": json.loads(staged.model_dump_json()), "config": {}})
        arrow, key = arrow_schema(schema)
        table = self.warehouse.create_table(
            namespace,
            created.name,
            arrow,
            primary_key=key,
            properties=stored_properties(properties),
            partition_by=partition_fields(spec),
            sort_by=sort_fields(order),
        )
        return Response(200, load_result(table))

    @_route("GET", "namespaces/([^/]+)/tables/([^/]+)")
    def load_table(self, request: Request, groups: list[str]) -> Response:
        try:
            table = self.warehouse.table(_namespace(groups[0]), groups[1])
        except NoSuchNamespaceError as e:  # a table's answer: Java then tries db.t.snapshots as a metadata table
            raise NoSuchTableError(str(e)) from e
        if request.method == "HEAD":
            return Response(204)
        snapshots = request.query.get("snapshots", "all")
        if snapshots not in ("all", "refs"):
            raise BadRequestError(f"snapshots is all or refs, not {snapshots!r}")
        return Response(200, load_result(table, refs_only=snapshots == "refs"))

    @_route("POST", "namespaces/([^/]+)/tables/([^/]+)/metrics")
    def report_metrics(self, request: Request, groups: list[str]) -> Response:
        """A client's scan and commit report: taken, and not kept (castable's history records commits)."""
        return Response(204)

    @_route("POST", "namespaces/([^/]+)/tables/([^/]+)", writes=True)
    def commit_table(self, request: Request, groups: list[str]) -> Response:
        namespace = _namespace(groups[0])
        asked = commit_table_request(request.json(), namespace, groups[1])
        key = request.header("Idempotency-Key")
        if any(isinstance(r, AssertCreate) for r in asked.requirements) and not self.warehouse.exists(
            namespace, groups[1]
        ):
            created = commits.create(self.warehouse, namespace, groups[1], asked, key)
            return Response(200, commit_result(*created))
        committed = commits.commit(self.warehouse.table(namespace, groups[1]), asked, key)
        return Response(200, commit_result(*committed))

    @_route("DELETE", "namespaces/([^/]+)/tables/([^/]+)", writes=True)
    def drop_table(self, request: Request, groups: list[str]) -> Response:
        purge = request.query.get("purgeRequested", "false").lower() == "true"
        self.warehouse.drop_table(_namespace(groups[0]), groups[1], purge=purge)
        return Response(204)

    @_route("POST", "tables/rename", writes=True)
    def rename_table(self, request: Request, _: list[str]) -> Response:
        raise UnsupportedError("rename is refused: a castable table is its folder, and castable does not move it")

    @_route("POST", "transactions/commit", writes=True)
    def commit_transaction(self, request: Request, _: list[str]) -> Response:
        changes = parsed(TableChanges, request.json()).table_changes
        requests = [commit_table_request(change, (), "") for change in changes]
        for asked in requests:
            if asked.identifier is None or not asked.identifier.name:
                raise BadRequestError("each of a transaction's table changes names its table (identifier)")
            if request.principal is not None:
                request.principal.check(tuple(asked.identifier.namespace.root), writes=True)
        commits.commit_transaction(self.warehouse, requests, request.header("Idempotency-Key"))
        return Response(204)


def _namespace(encoded: str) -> Namespace:
    """A namespace from its path segment (levels joined by the unit separator)."""
    namespace = tuple(encoded.split(SEPARATOR))
    if not all(namespace):
        raise BadRequestError(f"namespace {encoded!r} has an empty level")
    return namespace
