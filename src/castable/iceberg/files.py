"""pyiceberg's file interfaces over castable's object store: Iceberg metadata is written and
read with the table's own store (its credentials, endpoint, request accounting), never a
second client configured apart."""

from __future__ import annotations

import io
from typing import Any

from pyiceberg.io import FileIO, InputFile, InputStream, OutputFile, OutputStream

from castable.iceberg.schema import IcebergPublishError
from castable.store import ObjectStore, canonical_location


class StoredOutput(OutputFile):
    """An Iceberg file that becomes the object ``key`` when pyiceberg closes its stream, or
    with ``pending``, is added there to be put later (with others, at once)."""

    def __init__(self, store: ObjectStore, key: str, location: str, pending: dict[str, bytes] | None = None) -> None:
        super().__init__(location)
        self.store = store
        self.key = key
        self.size = 0
        self.pending = pending

    def save(self, data: bytes) -> None:
        if self.pending is None:
            self.store.put(self.key, data)
        else:
            self.pending[self.key] = data
        self.size = len(data)

    def __len__(self) -> int:
        return self.size

    def exists(self) -> bool:
        return self.store.exists(self.key)

    def to_input_file(self) -> InputFile:
        return StoredInput(self.store, self.key, self.location)

    def create(self, overwrite: bool = False) -> OutputStream:
        return _Upload(self)


class _Upload(io.BytesIO):
    """The bytes of one :class:`StoredOutput`, put as one object on close."""

    def __init__(self, target: StoredOutput) -> None:
        super().__init__()
        self.target = target

    def close(self) -> None:
        if not self.closed:
            self.target.save(self.getvalue())
        super().close()

    def __enter__(self) -> _Upload:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class StoredInput(InputFile):
    """An Iceberg file read whole from the object ``key`` (manifest lists are small)."""

    def __init__(self, store: ObjectStore, key: str, location: str) -> None:
        super().__init__(location)
        self.store = store
        self.key = key

    def __len__(self) -> int:
        return self.store.head(self.key).size

    def exists(self) -> bool:
        return self.store.exists(self.key)

    def open(self, seekable: bool = True) -> InputStream:
        return io.BytesIO(self.store.get(self.key).data)


class StoredFileIO(FileIO):
    """Reads of Iceberg files under the table at ``store`` (locations start at its URI), for
    pyiceberg's readers that take a FileIO, such as a manifest's entries."""

    def __init__(self, store: ObjectStore) -> None:
        super().__init__()
        self.store = store
        self.root = store.uri.rstrip("/")

    def new_input(self, location: str) -> InputFile:
        location = canonical_location(location)
        if not location.startswith(f"{self.root}/"):
            raise IcebergPublishError(f"{location} is not under the table's location {self.root}")
        return StoredInput(self.store, location[len(self.root) + 1 :], location)

    def new_output(self, location: str) -> OutputFile:
        raise NotImplementedError("castable writes Iceberg files with StoredOutput")

    def delete(self, location: str | InputFile | OutputFile) -> None:
        raise NotImplementedError("castable deletes Iceberg files through its retention")
