"""Operations on a table: writes, deletes, merge, replacement, registering files, batching and
the change feed."""
