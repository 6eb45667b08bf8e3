"""Work plans of the deployment's workflows (docs/format.md section 1): a list of items kept as
a JSON array under a table's root, which a Step Functions Distributed Map reads item by item,
so no state of the workflow carries the list (Step Functions' 256 KiB limit). Plans name files,
never row values; gc removes those older than its grace period."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from castable.errors import CorruptObjectError
from castable.format.layout import ERASURE_PLAN_PREFIX, MAINTENANCE_PLAN_PREFIX
from castable.store import ObjectStore

PLAN_PREFIXES = (ERASURE_PLAN_PREFIX, MAINTENANCE_PLAN_PREFIX)


def plan_key(prefix: str, name: str) -> str:
    """The key of the plan ``name`` (a request's commit id, a run's name) under ``prefix``: the
    same name gives the same key, so a re-run replaces its plan."""
    return f"{prefix}{hashlib.sha256(name.encode()).hexdigest()[:32]}.json"


def write_plan(store: ObjectStore, prefix: str, name: str, items: list[dict[str, Any]]) -> str:
    """Keep ``items`` as the plan ``name`` under ``prefix``; return its key."""
    key = plan_key(prefix, name)
    store.put(key, json.dumps(items, separators=(",", ":")).encode())
    return key


def read_plan(store: ObjectStore, key: str) -> list[dict[str, Any]]:
    """The items of the plan at ``key``."""
    try:
        items = json.loads(store.get(key).data)
    except ValueError as e:
        raise CorruptObjectError(f"work plan {key} is not JSON: {e}") from e
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise CorruptObjectError(f"work plan {key} is not a list of objects")
    return items
