"""An Iceberg REST catalog in front of castable's commit protocol: every Iceberg engine reads
and writes the castable tables under a warehouse folder, and every commit is a castable commit
(docs/catalog.md). ``castable catalog serve WAREHOUSE`` serves it on this machine
(:func:`castable.catalog.server.make_server`, on uvicorn); the Lambda handler serves the same
:func:`application` behind API Gateway.

Needs ``pip install 'castable[catalog]'``.
"""

from __future__ import annotations

from castable.catalog.access import Access, Principal
from castable.catalog.app import application
from castable.catalog.errors import CatalogError
from castable.catalog.service import Catalog, Request, Response
from castable.catalog.warehouse import Warehouse

__all__ = ["Access", "Catalog", "CatalogError", "Principal", "Request", "Response", "Warehouse", "application"]
