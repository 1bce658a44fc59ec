"""A rollup kept in PostgreSQL too, by the seed's mechanism: each batch's merged aggregates are
upserted and the job's offsets moved in one database transaction, the offsets guarded as the seed
guards them (`WHERE next_offset = <the range's start>`). ZooKeeper stays the job's truth; the
offsets table is the database's own mirror of it, and what tells a replay that its aggregates are
already in (etl.job.rollup_mirror; docs/design.md, "Rollups in PostgreSQL")."""
