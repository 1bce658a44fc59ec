"""Rows -> files: the warehouse filesystems, the Parquet writer, the atomic no-replace publish,
and the _SUCCESS markers."""
