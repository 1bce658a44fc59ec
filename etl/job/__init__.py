"""One batch: the batch state machine (plan, run the tasks: source -> rows -> sink, register,
commit), handed its parts by the command's context (etl.context); the loop of `etl run` is a
command, in etl.ops.run."""
