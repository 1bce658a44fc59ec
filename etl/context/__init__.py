"""The composition root: one context per command, which builds once, and only when first asked,
every client the command uses, and closes what it opened.

- etl.context.command.CommandContext: the state store, the warehouse's filesystem and layout,
  the clock, the partitioner, the Spark session and its Hive registrar. What `etl compact`,
  `etl history` and `etl bind` need; it imports nothing of Kafka, the rows or the job.
- etl.context.job.JobContext: that, plus the Kafka metadata client, the mirror of committed
  offsets to the job's consumer group (for the commands that move offsets), the writer spec and
  the Job, the batch state machine, assembled from them.

Commands (etl.ops.*) ask a context; nothing else in etl/ constructs a client. The one
exception is on the executors: a Spark task builds its own filesystem from the config it was
shipped (etl.job.tasks, etl.job.event_task), since no driver object crosses to it.
"""
