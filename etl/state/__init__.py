"""The job's state in ZooKeeper, in five parts behind etl.state.protocols: the lock and its
fence, plans and batches, committed offsets, operators' records and events, compactions."""
