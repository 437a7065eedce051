"""Line coverage of the Megatron tree in every process the harness starts (gate --coverage; docs/coverage.md).

The harness turns it on through the environment, which every process it starts inherits (mpirun ranks by -x):

  IH_COVERAGE_DIR      where each process writes its own data file (<dir>/.coverage.<host>.<pid>.<random>;
                       the harness runs `coverage combine` afterwards)
  IH_COVERAGE_SOURCE   the tree's megatron/ folder: the only code measured
  IH_COVERAGE_CONTEXT  the gate check running when the process starts (a round-trip rank's scenarios: a template
                       with "{scenario}", filled per scenario)

coverage.py runs with its sys.monitoring core (COVERAGE_CORE=sysmon). That core disables a line's event once the
line has been seen, which would record a line only under the first check that ran it; switch() re-enables every
event after switching the dynamic context (sys.monitoring.restart_events), so each check records the lines it runs.
Forked world workers restart coverage in the child (coverage.py's patch=fork) and save before they exit (save()).
"""

import os
import sys

DIR_ENV, SOURCE_ENV, CONTEXT_ENV = "IH_COVERAGE_DIR", "IH_COVERAGE_SOURCE", "IH_COVERAGE_CONTEXT"

_state = {"context": None}


def enabled():
    return bool(os.environ.get(DIR_ENV)) and bool(os.environ.get(SOURCE_ENV))


def start():
    """Starts coverage when the harness asked for it (the environment above); a no-op otherwise. Call before
    Megatron is imported: a module's top level runs once."""
    if not enabled() or _current() is not None:
        return
    os.environ.setdefault("COVERAGE_CORE", "sysmon")
    import coverage
    cov = coverage.Coverage(data_file=os.path.join(os.environ[DIR_ENV], ".coverage"), data_suffix=True,
                            source=[os.environ[SOURCE_ENV]], config_file=False, auto_data=False)
    cov.set_option("run:parallel", True)  # forked children get a file of their own too
    cov.set_option("run:patch", ["fork"])
    # The harness ends a world past its timeout with SIGTERM before SIGKILL: a rank that still runs Python then
    # writes what it ran. A rank killed outright writes nothing, so its lines count as not run, never as run.
    cov.set_option("run:sigterm", True)
    cov.set_option("run:disable_warnings", ["no-sysmon-context", "module-not-measured", "no-data-collected"])
    cov.start()
    os.register_at_fork(after_in_child=lambda: _state.update(context=None))  # the child's coverage starts afresh
    context = os.environ.get(CONTEXT_ENV) or None
    if context and "{scenario}" not in context:  # a rank's template is filled per scenario (run_scenario)
        switch(context)


def _current():
    if "coverage" not in sys.modules:
        return None
    return sys.modules["coverage"].Coverage.current()


def switch(context):
    """Records what runs from here on under `context` (a gate check's name); None or a repeat changes nothing."""
    cov = _current()
    if cov is None or not context or context == _state["context"]:
        return
    cov.switch_context(context)
    _state["context"] = context
    monitoring = getattr(sys, "monitoring", None)
    if monitoring is not None:
        monitoring.restart_events()


def current():
    """The context this process records under now (None: none yet, or coverage is off)."""
    return _state["context"]


def context_of(template, scenario):
    """A round-trip rank's context for one scenario: the template with its scenario filled in."""
    return template.replace("{scenario}", scenario) if template else None


def save():
    """Writes this process's data file (before an os._exit, which skips coverage.py's own atexit save)."""
    cov = _current()
    if cov is None:
        return
    try:
        cov.stop()
        cov.save()
    except Exception as exc:  # noqa: BLE001 - coverage lost is said, the process's answer stands
        print(f"coverage: could not save this process's data: {type(exc).__name__}: {exc}", file=sys.stderr)
