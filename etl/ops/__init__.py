"""The commands, each building what it uses through its context (etl.context): run, status,
check, history, verify, recover, reset-offsets, bind, compact, schema suggest; and the checks
they share."""
