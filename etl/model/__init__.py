"""What the job knows: batches and their states, file names, the planner, the table schema,
partitioning, recorded events, topic identity, the job's binding, compaction records. Values and
functions that build no client and open no connection; one reads, and says so:
schema.read_template (and load_table_schema, table_ddl.ddl_file through it) reads the DDL template
file at the path it is given."""
