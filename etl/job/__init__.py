"""One `etl run`: assemble the Job, plan, run the tasks (source -> rows -> sink), register, commit."""
