"""The format: commit, open and gc against the number of files, manifest encodings, schema evolution."""
