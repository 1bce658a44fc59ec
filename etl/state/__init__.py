"""The job's state in ZooKeeper: the lock, batch plans, committed offsets, recorded events."""
