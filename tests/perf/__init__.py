"""The benchmark of the ETL against the local stack (scripts/bench.py is its command line).

One module per concern: the load gate and the monitor (load), the job's phases through its
observer hook (phases), the records (data), the Spark tasks (spark_tasks), one run's context
(context), the workloads (throughput: drain, read_range, full batch, row by row; fixed_cost;
memory; scaling; profiling: cProfile and py-spy), the report (report) and its charts (plot).
Importable without pytest; it uses tests.harness for the stack, the INI writer and the producer."""
