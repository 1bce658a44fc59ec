"""What the job knows, without doing anything: batches and their states, file names, the
planner, the table schema, partitioning, recorded events. Pure values and functions, no I/O."""
