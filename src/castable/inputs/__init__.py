"""What callers hand castable, turned into batches of a table's schema: Arrow and pandas data
(``batches``), files users bring (``sources``: Parquet, CSV, JSON Lines) and Arrow types written as
text (``types``, the command line's type strings)."""
