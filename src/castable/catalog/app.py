"""The catalog as an ASGI application (Starlette): the one object that both ``castable catalog
serve`` (on uvicorn, :mod:`castable.catalog.server`) and the Lambda handler (through Mangum)
serve, so HTTP framing, chunked bodies, keep-alive and compression are a well-kept server's,
and what is the catalog's own is checked here before :meth:`Catalog.handle` sees a request:

- the body's size (``Content-Length`` and the bytes that come), 413 past :data:`MAX_BODY`;
- that a ``POST`` body is ``application/json`` (400 otherwise, as the spec lists no 415): a
  browser page cannot send that to another origin without the catalog's consent (a CORS
  preflight it never gives), so it cannot drive it;
- the ``Host`` header, against the names the server answers to (DNS rebinding);
- with an :class:`~castable.catalog.access.Access`, the bearer token (401 without one that
  the catalog knows), and ``POST /v1/oauth/tokens`` for OAuth2 client credentials.

Every refusal is the spec's error model (``{"error": {message, type, code}}``), a 4xx.
"""

from __future__ import annotations

from collections.abc import Collection
from urllib.parse import parse_qsl, urlsplit

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.gzip import GZipMiddleware
from starlette.requests import Request as HttpRequest
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from castable.catalog.access import Access, OAuthRefusal, Principal
from castable.catalog.errors import (
    BadRequestError,
    CatalogError,
    MethodNotAllowedError,
    NotAuthorizedError,
    TooLargeError,
    answer_for,
)
from castable.catalog.service import Catalog, Request

MAX_BODY = 8 * 1024 * 1024
"""The largest request body taken (a table's create or commit is kilobytes)."""
COMPRESS_OVER = 64 * 1024
"""Answers larger than this are gzip-compressed for a client that accepts it."""
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
METHODS = ["GET", "HEAD", "POST", "DELETE"]


def application(catalog: Catalog, *, access: Access | None = None, hosts: Collection[str] | None = None) -> Starlette:
    """The ASGI application of ``catalog``. ``access``: who may use it (``None``: anyone who
    reaches it, as behind API Gateway's IAM); ``hosts``: the names a request's ``Host`` may give
    (``None``: any)."""
    allowed = None if hosts is None else frozenset(h.lower() for h in hosts)

    async def answer(http: HttpRequest) -> Response:
        try:
            _check_host(http, allowed)
            body = await _body(http)
            if http.method == "POST" and body:
                _check_json(http)
            principal = _principal(http, access)
            request = Request(
                method=http.method,
                path=http.url.path,
                query=dict(http.query_params),
                headers=dict(http.headers),
                body=body,
                principal=principal,
            )
        except CatalogError as e:
            return _error(e)
        response = await run_in_threadpool(catalog.handle, request)
        if response.body is None:
            return Response(status_code=response.status)
        return JSONResponse(response.body, status_code=response.status)

    async def token(http: HttpRequest) -> Response:
        try:
            _check_host(http, allowed)
            body = await _body(http)
        except CatalogError as e:
            return _error(e)
        if access is None:
            refusal = OAuthRefusal(
                400, "invalid_request", "this catalog is served without authentication: no token is needed"
            )
            return JSONResponse(refusal.body, status_code=refusal.status)
        form = dict(parse_qsl(body.decode("utf-8", "replace")))
        try:
            issued = access.issue(form, http.headers.get("authorization"))
        except OAuthRefusal as refusal:
            return JSONResponse(refusal.body, status_code=refusal.status, headers={"Cache-Control": "no-store"})
        return JSONResponse(issued, headers={"Cache-Control": "no-store"})

    async def http_error(http: HttpRequest, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        if exc.status_code == 405:
            return _error(MethodNotAllowedError(f"{http.method} is not a method of the Iceberg REST catalog"))
        return _error(BadRequestError(exc.detail))

    return Starlette(
        routes=[
            Route("/v1/oauth/tokens", token, methods=["POST"]),
            Route("/{path:path}", answer, methods=METHODS),
        ],
        middleware=[Middleware(GZipMiddleware, minimum_size=COMPRESS_OVER, compresslevel=6)],
        exception_handlers={HTTPException: http_error},
    )


def _error(error: CatalogError) -> Response:
    status, body = answer_for(error)
    headers = {"WWW-Authenticate": 'Bearer realm="castable"'} if isinstance(error, NotAuthorizedError) else None
    return JSONResponse(body, status_code=status, headers=headers)


def _check_host(http: HttpRequest, allowed: frozenset[str] | None) -> None:
    if allowed is None:
        return
    host = (urlsplit(f"//{http.headers.get('host', '')}").hostname or "").lower()
    if host not in allowed:
        raise BadRequestError(
            f"this catalog does not answer to host {host or '(none)'!r} (castable catalog serve --allowed-host)"
        )


async def _body(http: HttpRequest) -> bytes:
    declared = http.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY:
        raise TooLargeError(f"the request body is {declared} bytes, more than the {MAX_BODY} this catalog takes")
    chunks, size = [], 0
    async for chunk in http.stream():
        size += len(chunk)
        if size > MAX_BODY:
            raise TooLargeError(f"the request body is more than the {MAX_BODY} bytes this catalog takes")
        chunks.append(chunk)
    return b"".join(chunks)


def _check_json(http: HttpRequest) -> None:
    media = http.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media != "application/json":
        raise BadRequestError(f"a POST body to this catalog is application/json, not {media or 'untyped'}")


def _principal(http: HttpRequest, access: Access | None) -> Principal | None:
    return None if access is None else access.authenticate(http.headers.get("authorization"))
