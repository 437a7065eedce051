"""The world tasks: one table from task name to function(ctx, payload) -> picklable result. A worker
runs what the parent asks by name (gloo_worlds.World.run); forked workers see the parent's table."""

from megatron_adapter.worlds import checkpoint_tasks, finding_tasks, gdp_tasks, model_tasks, optimizer_tasks

TASKS = {
    "ping": gdp_tasks.task_ping,
    "gdp_save": gdp_tasks.task_gdp_save,
    "gdp_save_unpatched": gdp_tasks.task_gdp_save_unpatched,
    "gdp_merge": gdp_tasks.task_gdp_merge,
    "election": gdp_tasks.task_election,
    "restore_parallel_state": gdp_tasks.task_restore_parallel_state,
    "opt_save": optimizer_tasks.task_opt_save,
    "opt_load": optimizer_tasks.task_opt_load,
    "fresh_retarget": finding_tasks.task_fresh_retarget,
    "ordering": checkpoint_tasks.task_ordering,
    "single_expert": finding_tasks.task_single_expert,
    "ckpt_save": checkpoint_tasks.task_ckpt_save,
    "load_state": checkpoint_tasks.task_load_state,
    "real_model_dump": model_tasks.task_real_model_dump,
}
