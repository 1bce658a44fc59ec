"""Rows -> files: the warehouse filesystems, the file writers (etl.sink.file_format), the atomic
no-replace publish, and the _SUCCESS markers."""
