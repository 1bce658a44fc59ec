"""The commands, each building what it uses through its context (etl.context): run (and its
--dry-run), status, check, history, verify, recover, reset-offsets, bind, compact, schema suggest;
the checks they share; and the metrics of `etl run`."""
