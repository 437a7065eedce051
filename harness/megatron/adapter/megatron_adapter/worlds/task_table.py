"""The world tasks: one table from task name to its function(ctx, payload) -> picklable result and the patch
families (patches/table.py) in force while it runs, besides the worker's GTP flags. A worker runs what the parent
asks by name (gloo_worlds.World.run); forked workers see the parent's table."""

import collections

from megatron_adapter.worlds import checkpoint_tasks, finding_tasks, gdp_tasks, model_tasks, optimizer_tasks

Task = collections.namedtuple("Task", "run patches")

SAVES_ON_CPU = ("cpu_save", "save_speed")  # dist_checkpointing's synchronous save and load on CPU

TASKS = {
    "ping": Task(gdp_tasks.task_ping, ()),
    "gdp_save": Task(gdp_tasks.task_gdp_save, ()),
    "gdp_save_unpatched": Task(gdp_tasks.task_gdp_save_unpatched, ()),
    "gdp_merge": Task(gdp_tasks.task_gdp_merge, ()),
    "election": Task(gdp_tasks.task_election, ()),
    "restore_parallel_state": Task(gdp_tasks.task_restore_parallel_state, ()),
    "opt_save": Task(optimizer_tasks.task_opt_save, SAVES_ON_CPU + ("float16_optimizer",)),
    "opt_load": Task(optimizer_tasks.task_opt_load, SAVES_ON_CPU + ("float16_optimizer",)),
    "fresh_retarget": Task(finding_tasks.task_fresh_retarget, SAVES_ON_CPU),
    "ordering": Task(checkpoint_tasks.task_ordering, SAVES_ON_CPU),
    "single_expert": Task(finding_tasks.task_single_expert, SAVES_ON_CPU),
    "ckpt_save": Task(checkpoint_tasks.task_ckpt_save, SAVES_ON_CPU),
    "load_state": Task(checkpoint_tasks.task_load_state, SAVES_ON_CPU),
    "real_model_dump": Task(model_tasks.task_real_model_dump, ()),
}
