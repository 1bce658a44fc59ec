"""Compaction, one room: merging a Hive partition's small files into few, exactly once, while
analysts query (docs/compaction.md).

  plan.py       which committed files go into which merged file
  choice.py     which partitions are compacted, and the plan of each
  merge.py      the merge itself, its values proven before it is published
  switch.py     the metastore side: point the partition at the merged folder, refuse to delete
                what Hive reads
  compactor.py  a compaction's record walked forward: PLANNED -> WRITTEN -> SWITCHED -> gone
  records.py    what compaction needs of the state store (the records themselves are stored
                by etl.state.compaction_records)
  tables.py     the tables a compaction acts on, each through its own folders and metastore client
  run.py        `etl compact`'s and `etl run`'s step: finish, choose, plan, carry out

Its floor lies between hive and job: it uses the model, the sink, the state store and the Hive
registrar, and knows nothing of a batch: the command hands it its context, a CompactionHost (run.py).
Its data (CompactionPlan, Relocations, TableKind) is in etl.model.compaction, below the
warehouse and the registrar that read it; its settings in etl.config.compaction.
"""
