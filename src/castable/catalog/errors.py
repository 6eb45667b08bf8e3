"""The catalog's errors, each answered with the status and error type the Iceberg REST spec
gives it; castable's own errors map onto them in :func:`answer_for`."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError
from pyiceberg.exceptions import CommitFailedException

from castable.errors import (
    CastableError,
    CommitConflictError,
    CommitStateUnknownError,
    DatabaseAlreadyExistsError,
    DatabaseNotFoundError,
    EmptyWriteError,
    InvalidInputError,
    InvalidPredicateError,
    SchemaMismatchError,
    TableAlreadyExistsError,
    TableNotFoundError,
    UnsupportedFileError,
)
from castable.store.errors import StoreUnavailableError


class CatalogError(CastableError):
    """A request the catalog answers with an error; ``status`` and ``kind`` as the spec names them."""

    status = 500
    kind = "InternalServerError"


class BadRequestError(CatalogError):
    status, kind = 400, "BadRequestException"


class RouteNotFoundError(CatalogError):
    status, kind = 404, "NotFoundException"


class NoSuchNamespaceError(CatalogError):
    status, kind = 404, "NoSuchNamespaceException"


class NoSuchTableError(CatalogError):
    status, kind = 404, "NoSuchTableException"


class AlreadyExistsError(CatalogError):
    status, kind = 409, "AlreadyExistsException"


class NamespaceNotEmptyError(CatalogError):
    status, kind = 409, "NamespaceNotEmptyException"


class CommitFailedError(CatalogError):
    """A requirement failed or the table moved: the client loads the table and tries again."""

    status, kind = 409, "CommitFailedException"


class UnsupportedError(CatalogError):
    status, kind = 406, "UnsupportedOperationException"


class NotAuthorizedError(CatalogError):
    """No credentials, or credentials the catalog does not know (or a token that expired)."""

    status, kind = 401, "NotAuthorizedException"


class ForbiddenError(CatalogError):
    """Credentials the catalog knows, of a principal that may not do what was asked."""

    status, kind = 403, "ForbiddenException"


class TooLargeError(CatalogError):
    status, kind = 413, "BadRequestException"


class MethodNotAllowedError(CatalogError):
    status, kind = 405, "BadRequestException"


_INVALID = (InvalidInputError, SchemaMismatchError, InvalidPredicateError, EmptyWriteError, UnsupportedFileError)
_MAPPED: tuple[tuple[type[BaseException] | tuple[type[BaseException], ...], int, str], ...] = (
    (CommitConflictError, 409, "CommitFailedException"),
    (CommitFailedException, 409, "CommitFailedException"),
    (TableNotFoundError, 404, "NoSuchTableException"),
    (DatabaseNotFoundError, 404, "NoSuchNamespaceException"),
    (TableAlreadyExistsError, 409, "AlreadyExistsException"),
    (DatabaseAlreadyExistsError, 409, "AlreadyExistsException"),
    (CommitStateUnknownError, 500, "CommitStateUnknownException"),
    (StoreUnavailableError, 503, "ServiceUnavailableException"),
    (_INVALID, 400, "BadRequestException"),
    (ValidationError, 400, "BadRequestException"),
)


def answer_for(error: BaseException) -> tuple[int, dict[str, Any]]:
    """The status and Iceberg error body (``{"error": {message, type, code}}``) of ``error``."""
    if isinstance(error, CatalogError):
        status, kind = error.status, error.kind
    else:
        status, kind = next(((s, k) for t, s, k in _MAPPED if isinstance(error, t)), (500, "InternalServerError"))
    message = _described(error) if isinstance(error, ValidationError) else str(error) or type(error).__name__
    return status, {"error": {"message": message, "type": kind, "code": status}}


def _described(error: ValidationError) -> str:
    """A request model's refusal in one line: where each mistake is and what was expected."""
    found = error.errors(include_url=False)
    parts = [f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}" for e in found[:5]]
    more = f" (and {len(found) - 5} more)" if len(found) > 5 else ""
    return f"the request does not match the Iceberg REST spec's {error.title}: {'; '.join(parts)}{more}"
