"""An Iceberg REST catalog in front of castable's commit protocol: every Iceberg engine reads
and writes the castable tables under a warehouse folder, and every commit is a castable commit
(docs/catalog.md). ``castable catalog serve WAREHOUSE`` serves it on this machine.

Needs pyiceberg: ``pip install 'castable[iceberg]'``.
"""

from __future__ import annotations

from castable.catalog.errors import CatalogError
from castable.catalog.server import make_server
from castable.catalog.service import Catalog, Request, Response
from castable.catalog.warehouse import Warehouse

__all__ = ["Catalog", "CatalogError", "Request", "Response", "Warehouse", "make_server"]
