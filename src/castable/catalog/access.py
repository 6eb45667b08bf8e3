"""Who may use a served catalog: principals, each with a secret, read or read-write access and
optionally only some namespaces, and the tokens the catalog issues them.

A client authenticates with ``Authorization: Bearer <token>``, where the token is either its
secret itself (pyiceberg's ``token=``) or a short-lived token the catalog signed for it at
``POST /v1/oauth/tokens`` (OAuth2 client credentials: pyiceberg's, Spark's and Trino's
``credential=<name>:<secret>``, DuckDB's ``CLIENT_ID`` and ``CLIENT_SECRET``). Secrets are
compared in constant time; signed tokens are JSON Web Tokens (HS256) naming the principal and
their expiry, signed with a key the catalog makes at start (or the access file's
``signing-key``, for several servers behind one address). Nothing here logs a secret or a token.

The access file (TOML)::

    [principals.etl]
    secret = "..."              # at least 16 characters
    access = "write"            # or "read"
    namespaces = ["sales"]      # optional: these namespaces and those under them only
"""

from __future__ import annotations

import base64
import binascii
import hmac
import secrets
import time
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt

from castable.catalog.errors import ForbiddenError, NotAuthorizedError
from castable.catalog.warehouse import Namespace
from castable.errors import InvalidInputError

TOKEN_LIFETIME = 3600
"""Seconds a signed token is good for; clients ask for a new one with their credentials."""
MIN_SECRET = 16
"""The shortest secret taken: a secret guessed is the warehouse given away."""
_ISSUER = "castable-catalog"
_ACCESS_TOKEN = "urn:ietf:params:oauth:token-type:access_token"
_TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"


@dataclass(frozen=True)
class Principal:
    """One client of the catalog: what it may do, and where."""

    name: str
    writes: bool
    namespaces: tuple[Namespace, ...] | None = None
    """The namespaces it reaches (with those under them); ``None``: every one."""

    def reaches(self, namespace: Namespace) -> bool:
        return self.namespaces is None or any(namespace[: len(n)] == n for n in self.namespaces)

    def sees(self, namespace: Namespace) -> bool:
        """Whether a listing shows it ``namespace``: one it reaches, or one on the way to one."""
        return self.reaches(namespace) or any(n[: len(namespace)] == namespace for n in self.namespaces or ())

    def check(self, namespace: Namespace | None, writes: bool) -> None:
        """``ForbiddenError`` unless it may read (or with ``writes``, change) ``namespace``
        (``None``: the catalog as a whole)."""
        if writes and not self.writes:
            raise ForbiddenError(f"principal {self.name} may read this catalog, not change it")
        if namespace is not None and not self.reaches(namespace):
            raise ForbiddenError(f"principal {self.name} may not use namespace {'.'.join(namespace)}")


class OAuthRefusal(Exception):
    """A token request refused, answered with OAuth2's error body (RFC 6749, section 5.2)."""

    def __init__(self, status: int, error: str, description: str) -> None:
        super().__init__(description)
        self.status = status
        self.body = {"error": error, "error_description": description}


class Access:
    """The principals of a served catalog, by name with their secrets, and its token signer."""

    def __init__(
        self,
        principals: Mapping[str, tuple[str, Principal]],
        *,
        key: bytes | None = None,
        lifetime: int = TOKEN_LIFETIME,
    ) -> None:
        for name, (secret, _) in principals.items():
            if len(secret) < MIN_SECRET:
                raise InvalidInputError(f"principal {name}'s secret is shorter than {MIN_SECRET} characters")
        if not principals:
            raise InvalidInputError("an access list names at least one principal")
        self._principals = dict(principals)
        self._key = key or secrets.token_bytes(32)
        self.lifetime = lifetime

    @classmethod
    def from_token(cls, token: str) -> Access:
        """One principal, ``token``, who may do everything with the secret ``token`` (the
        ``CASTABLE_CATALOG_TOKEN`` environment variable)."""
        return cls({"token": (token, Principal("token", writes=True))})

    @classmethod
    def from_file(cls, path: str | Path) -> Access:
        """The principals of an access file (the module's docstring shows one)."""
        try:
            doc = tomllib.loads(Path(path).read_text())
        except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
            raise InvalidInputError(f"cannot read the access file {path}: {e}") from e
        principals: dict[str, tuple[str, Principal]] = {}
        for name, entry in (doc.get("principals") or {}).items():
            principals[name] = _entry(path, name, entry)
        key = doc.get("signing-key")
        return cls(principals, key=key.encode() if isinstance(key, str) else None)

    def authenticate(self, authorization: str | None) -> Principal:
        """The principal an ``Authorization`` header proves, or ``NotAuthorizedError``."""
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise NotAuthorizedError("this catalog needs a bearer token: Authorization: Bearer <token>")
        found = self._by_secret(token.strip()) or self._by_signed(token.strip())
        if found is None:
            raise NotAuthorizedError("the bearer token is not one this catalog issued or knows, or it expired")
        return found

    def issue(self, form: Mapping[str, str], authorization: str | None = None) -> dict[str, Any]:
        """The answer to a token request: client credentials (in the form or as HTTP Basic), or
        a token exchanged for a fresh one (how Java's client refreshes)."""
        grant = form.get("grant_type", "")
        if grant == "client_credentials":
            name, secret = _credentials(form, authorization)
            known = self._principals.get(name)
            matches = hmac.compare_digest(secret.encode(), (known[0] if known else secrets.token_hex(16)).encode())
            if known is None or not matches:
                raise OAuthRefusal(401, "invalid_client", "the client id or secret is not one this catalog knows")
            principal = known[1]
        elif grant == _TOKEN_EXCHANGE:
            held = self._by_signed(form.get("subject_token", "")) or self._by_secret(form.get("subject_token", ""))
            if held is None:
                raise OAuthRefusal(401, "invalid_grant", "the subject token is not one this catalog issued")
            principal = held
        else:
            raise OAuthRefusal(
                400,
                "unsupported_grant_type",
                f"grant_type {grant!r}: this catalog issues tokens for client_credentials",
            )
        now = int(time.time())
        claims = {"sub": principal.name, "iss": _ISSUER, "iat": now, "exp": now + self.lifetime}
        token = jwt.encode(claims, self._key, algorithm="HS256")
        return {
            "access_token": token,
            "token_type": "bearer",
            "expires_in": self.lifetime,
            "issued_token_type": _ACCESS_TOKEN,
        }

    def _by_secret(self, token: str) -> Principal | None:
        found = None
        for secret, principal in self._principals.values():  # every one compared: no timing tells which
            if hmac.compare_digest(token.encode(), secret.encode()):
                found = principal
        return found

    def _by_signed(self, token: str) -> Principal | None:
        try:
            claims = jwt.decode(
                token, self._key, algorithms=["HS256"], issuer=_ISSUER, options={"require": ["exp", "sub"]}
            )
        except jwt.InvalidTokenError:
            return None
        known = self._principals.get(str(claims["sub"]))
        return None if known is None else known[1]


def _entry(path: str | Path, name: str, entry: Any) -> tuple[str, Principal]:
    where = f"the access file {path}, principal {name}"
    if not isinstance(entry, dict) or not isinstance(entry.get("secret"), str):
        raise InvalidInputError(f"{where}: a principal is a table with a secret (a string)")
    access = entry.get("access", "read")
    if access not in ("read", "write"):
        raise InvalidInputError(f"{where}: access is read or write, not {access!r}")
    namespaces = entry.get("namespaces")
    if namespaces is not None and not (
        isinstance(namespaces, list) and all(isinstance(n, str) and n for n in namespaces)
    ):
        raise InvalidInputError(f'{where}: namespaces is a list of names such as ["sales", "ops.raw"]')
    reached = None if namespaces is None else tuple(tuple(n.split(".")) for n in namespaces)
    return entry["secret"], Principal(name, writes=access == "write", namespaces=reached)


def _credentials(form: Mapping[str, str], authorization: str | None) -> tuple[str, str]:
    """A token request's client id and secret: the form's, or HTTP Basic's (RFC 6749, 2.3.1)."""
    if "client_id" in form or "client_secret" in form:
        return form.get("client_id", ""), form.get("client_secret", "")
    scheme, _, encoded = (authorization or "").partition(" ")
    if scheme.lower() == "basic":
        try:
            name, _, secret = base64.b64decode(encoded, validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            raise OAuthRefusal(400, "invalid_request", "the Basic credentials are not base64 of id:secret") from None
        return name, secret
    raise OAuthRefusal(400, "invalid_request", "a client_credentials request names client_id and client_secret")
