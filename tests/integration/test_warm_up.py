"""The Python workers' warm-up: a job of its own group, one task per executor slot, that
starts the workers and imports the task modules while the driver checks the Hive tables."""
from __future__ import annotations

from etl.job.warm_up import WARM_UP_GROUP, warm_python_workers


def test_the_warm_up_runs_one_task_per_slot_in_its_own_group_and_leaves_the_caller_s_group_alone(spark):
    context = spark.sparkContext
    context.setJobGroup("the-callers-group", "a batch")
    try:
        thread = warm_python_workers(spark.sparkContext)
        thread.join(timeout=300)
        assert not thread.is_alive()
        tracker = context.statusTracker()
        jobs = [tracker.getJobInfo(job) for job in tracker.getJobIdsForGroup(WARM_UP_GROUP)]
        assert jobs and jobs[-1].status == "SUCCEEDED"
        stage = tracker.getStageInfo(jobs[-1].stageIds[0])
        assert stage.numTasks == context.defaultParallelism == stage.numCompletedTasks
        assert context.getLocalProperty("spark.jobGroup.id") == "the-callers-group"  # the group is per thread
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
