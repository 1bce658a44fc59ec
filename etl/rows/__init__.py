"""RawChunk -> rows: decode, add lineage, enrich with dimensions, apply the transform, and sort
what Hive could not read back into rejected rows. No file is written here."""
