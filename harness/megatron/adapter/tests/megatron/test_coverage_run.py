"""megatron_adapter.coverage_run on a stand-in package, in the venv's coverage.py (no Megatron needed): each switch
records under its context, a line run again under a later context carries both (sys.monitoring's events restarted),
and a forked child records under its own context into its own data file."""

import json
import os
import subprocess
import sys
import textwrap

ADAPTER = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

MODULE = '''
def first():
    return 1


def second():
    return 2


def never():
    return 3
'''

DRIVER = textwrap.dedent('''
    import os, sys
    sys.path.insert(1, {adapter!r})
    from megatron_adapter import coverage_run
    coverage_run.start()
    sys.path.insert(0, {tree!r})
    from megatron import stand_in
    coverage_run.switch("gate/a/one"); stand_in.first()
    coverage_run.switch("gate/a/two"); stand_in.first()
    pid = os.fork()
    if pid == 0:
        coverage_run.switch("gate/a/two")  # the child's coverage starts afresh: the same name must still switch
        stand_in.second()
        coverage_run.save()
        os._exit(0)
    os.waitpid(pid, 0)
    coverage_run.save()
''')


def stand_in_tree(tmp_path):
    """A megatron/ package of MODULE, a data folder, and the environment that measures the one into the other."""
    tree, data = tmp_path / "tree", tmp_path / "data"
    (tree / "megatron").mkdir(parents=True)
    data.mkdir()
    (tree / "megatron" / "__init__.py").write_text("")
    (tree / "megatron" / "stand_in.py").write_text(MODULE)
    return tree, data, dict(os.environ, IH_COVERAGE_DIR=str(data), IH_COVERAGE_SOURCE=str(tree / "megatron"))


def test_contexts_per_switch_and_per_forked_child(tmp_path):
    tree, data, env = stand_in_tree(tmp_path)
    subprocess.run([sys.executable, "-c", DRIVER.format(adapter=ADAPTER, tree=str(tree))], env=env, check=True)
    assert len([f for f in os.listdir(data) if f.startswith(".coverage.")]) == 2  # parent and child
    subprocess.run([sys.executable, "-m", "coverage", "combine", "--quiet", f"--data-file={data}/.coverage",
                    str(data)], check=True)
    subprocess.run([sys.executable, "-m", "coverage", "json", "--quiet", "--show-contexts",
                    f"--data-file={data}/.coverage", "-o", str(data / "c.json")], check=True, cwd=tree)
    report = json.loads((data / "c.json").read_text())["files"]["megatron/stand_in.py"]
    assert set(report["contexts"]["3"]) == {"gate/a/one", "gate/a/two"}  # first()'s body, run under both
    assert report["contexts"]["7"] == ["gate/a/two"]  # second()'s body, run by the child only
    assert "11" not in report["contexts"] and 11 in report["missing_lines"]  # never()


def test_without_the_environment_nothing_is_measured(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("IH_COVERAGE_")}
    code = (f"import sys; sys.path.insert(1, {ADAPTER!r}); from megatron_adapter import coverage_run; "
            "coverage_run.start(); coverage_run.switch('gate/x/y'); "
            "print(coverage_run.current(), 'coverage' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True).stdout
    assert out.split() == ["None", "False"]


TERMINATED = textwrap.dedent('''
    import os, signal, sys
    sys.path.insert(1, {adapter!r})
    from megatron_adapter import coverage_run
    coverage_run.start()
    sys.path.insert(0, {tree!r})
    from megatron import stand_in
    coverage_run.switch("gate/a/one"); stand_in.never()
    os.kill(os.getpid(), signal.SIGTERM)  # as the harness ends a world past its timeout, before any save()
''')


def test_a_process_ended_by_sigterm_still_writes_what_it_ran(tmp_path):
    tree, data, env = stand_in_tree(tmp_path)
    done = subprocess.run([sys.executable, "-c", TERMINATED.format(adapter=ADAPTER, tree=str(tree))], env=env)
    assert done.returncode == -15  # it still dies of the signal
    files = [f for f in os.listdir(data) if f.startswith(".coverage.")]
    assert len(files) == 1
    subprocess.run([sys.executable, "-m", "coverage", "json", "--quiet", f"--data-file={data}/{files[0]}",
                    "-o", str(data / "c.json")], check=True, cwd=tree)
    report = json.loads((data / "c.json").read_text())["files"]["megatron/stand_in.py"]
    assert 11 in report["executed_lines"]  # never()'s body
