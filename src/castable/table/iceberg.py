"""How a table's commits, purges and retention reach its published Iceberg metadata.

``castable.iceberg`` needs pyiceberg, an extra (``castable[iceberg]``) that tables without
``publish.iceberg`` lack: it is imported here only when a table has published metadata, and its
absence is logged, never a failure of the commit or maintenance that asked for it.
"""

from __future__ import annotations

import logging
import os
from types import ModuleType

from castable.commit.change import CommitResult
from castable.commit.committer import OwnLog
from castable.commit.handle import Handle
from castable.commit.pointer import Pointer
from castable.format.layout import ICEBERG_HINT
from castable.format.properties import AFTER_COMMIT, TableProperties
from castable.store import ObjectStore

log = logging.getLogger(__name__)


def retention(store: ObjectStore) -> ModuleType | None:
    """``castable.iceberg.retention`` if the table has published Iceberg metadata to keep in step
    with castable's retention (and pyiceberg is there to publish it again); ``None`` otherwise."""
    if not store.exists(ICEBERG_HINT):
        return None
    try:
        from castable.iceberg import retention
    except ImportError as e:
        log.warning("%s has Iceberg metadata, but pyiceberg is missing to keep it in step: %s", store.uri, e)
        return None
    return retention


def publish_after_purge(table: Handle) -> None:
    """The published Iceberg metadata a purge deleted, written again for the newest version."""
    try:
        from castable.iceberg import publish_after_purge
    except ImportError as e:
        log.warning(
            "%s publishes Iceberg metadata, but pyiceberg is missing to publish it after a purge: %s", table.uri, e
        )
        return
    publish_after_purge(table)


def own_log(store: ObjectStore, pointer: Pointer | None) -> OwnLog:
    """A standalone table's committer, which publishes each commit as Iceberg metadata when the
    table asks for it (a database publishes its members' commits itself)."""
    return OwnLog(store, pointer, after_commit)


def after_commit(store: ObjectStore, result: CommitResult) -> None:
    """After a commit of a table's own log: have it published if the table sets ``publish.iceberg``
    and this process publishes (:func:`publishes_here`)."""
    if TableProperties.parse(result.manifest.properties).publish_iceberg and publishes_here():
        publish_soon(store, result.version)


def publishes_here() -> bool:
    """Whether this process publishes its commits (``publish.iceberg``), or leaves them to another
    that publishes every commit (the deployment's catalog function): ``AFTER_COMMIT`` says."""
    return os.environ.get(AFTER_COMMIT, "true").strip().lower() != "false"


def publish_soon(store: ObjectStore, version: int) -> None:
    """Have the commit just made published as Iceberg metadata, on a thread of its own
    (``publish.iceberg``): never in the commit's way, and never its failure."""
    try:
        from castable.iceberg import background
    except ImportError as e:
        log.warning(
            "publish.iceberg is set on %s but pyiceberg is missing (pip install 'castable[iceberg]'): %s", store.uri, e
        )
        return
    background.publish_soon(store, version)
