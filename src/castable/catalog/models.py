"""The request bodies of the Iceberg REST spec, validated before use: pyiceberg's models where it
has them (a table's create and commit), and the spec's others here, strict (a namespace level
is a string, never a number read as one) and bounded (names, property counts and sizes), so
that every client mistake is a 400 that says where it is, and nothing unbounded is stored."""

from __future__ import annotations

from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, TypeAdapter, ValidationError
from pyiceberg.catalog.rest import CreateTableRequest
from pyiceberg.table import CommitTableRequest

from castable.catalog.errors import BadRequestError

MAX_LEVELS = 16
"""The most levels a namespace has (each is a folder, and paths have a length limit)."""
MAX_PROPERTIES = 1000
"""The most properties a namespace or table holds."""
MAX_KEY = 256
"""The longest property name, in characters."""
MAX_VALUE = 64 * 1024
"""The longest property value, in characters (every lookup of a namespace reads all of them)."""

Level = Annotated[str, StringConstraints(strict=True, min_length=1, max_length=255)]
Key = Annotated[str, StringConstraints(strict=True, min_length=1, max_length=MAX_KEY)]
Value = Annotated[str, StringConstraints(strict=True, max_length=MAX_VALUE)]
Properties = Annotated[dict[Key, Value], Field(max_length=MAX_PROPERTIES)]
BOUNDED = TypeAdapter(Properties, config=ConfigDict(title="properties"))
"""The bounds of :data:`Properties` for properties a pyiceberg model parsed (a table's)."""


class _Body(BaseModel):
    model_config = ConfigDict(strict=True, populate_by_name=True, frozen=True)


class CreateNamespaceRequest(_Body):
    namespace: Annotated[list[Level], Field(min_length=1, max_length=MAX_LEVELS)]
    properties: Properties = {}


class UpdateNamespacePropertiesRequest(_Body):
    removals: Annotated[list[Key], Field(max_length=MAX_PROPERTIES)] = []
    updates: Properties = {}


class TableChanges(_Body):
    """``POST /v1/transactions/commit``: each table's commit, checked as a table's commit is."""

    table_changes: Annotated[list[dict[str, Any]], Field(alias="table-changes", min_length=1)]


Model = TypeVar("Model", bound=BaseModel)


def parsed(model: type[Model], body: dict[str, Any]) -> Model:
    """``body`` as ``model``, or a 400 naming each mistake. pyiceberg's models also raise plain
    ``ValueError`` and ``TypeError`` from their validators (a default on a nested field, for one):
    a body they cannot take is the client's mistake whatever the exception."""
    try:
        return model.model_validate(body)
    except ValidationError:
        raise
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        raise BadRequestError(f"the request does not match the Iceberg REST spec's {model.__name__}: {e}") from e


def create_table_request(body: dict[str, Any]) -> CreateTableRequest:
    """A table's create, with the members the spec makes optional defaulted as pyiceberg needs."""
    for optional in ("location", "partition-spec", "write-order"):
        body.setdefault(optional, None)
    return parsed(CreateTableRequest, body)


def commit_table_request(body: dict[str, Any], namespace: tuple[str, ...], name: str) -> CommitTableRequest:
    """A table's commit; its identifier, which the path gives, is optional in the body."""
    body.setdefault("identifier", {"namespace": list(namespace), "name": name})
    return parsed(CommitTableRequest, body)
