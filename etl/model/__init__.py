"""What the job knows: batches and their states, file names, the planner, the table schema,
partitioning, recorded events, topic identity, the job's binding, compaction records. Values and
functions that build no client and open no connection; one reads, and says so:
schema.load_table_schema and schema.render_ddl read the DDL template file at the path they are
given."""
