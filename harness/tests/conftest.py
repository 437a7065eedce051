"""pytest set-up for the harness's own tests (harness/tests/*_test.py, run by ctest through run_pytest.sh): the
binary, the clone and the corpus they test, given on the command line, and ctest's "skipped" exit code 77 when
every test of a run was skipped (never a pass)."""

import os
import subprocess

import pytest

SKIPPED = 77


def pytest_addoption(parser):
    parser.addoption("--cli", default=None, help="the interop-harness binary")
    parser.addoption("--root", default=None, help="the clone's root (REPO_ROOT)")
    parser.addoption("--corpus", default=None, help="the corpus folder")
    parser.addoption("--megatron-path", default=None, help="a Megatron-LM checkout (the snapshot)")
    parser.addoption("--case", default=None, help="interrupt_test.py: the case to interrupt")
    parser.addoption("--part", default=None, choices=("plain", "megatron"), help="docs_commands_test.py: which part")


def _option(config, name):
    value = config.getoption(name)
    if value is None:
        pytest.fail(f"this test needs --{name}")
    return value


@pytest.fixture(scope="session")
def cli(pytestconfig):
    return os.path.abspath(_option(pytestconfig, "cli"))


@pytest.fixture(scope="session")
def root(pytestconfig):
    return os.path.abspath(_option(pytestconfig, "root"))


@pytest.fixture(scope="session")
def corpus(pytestconfig):
    return os.path.abspath(_option(pytestconfig, "corpus"))


@pytest.fixture(scope="session")
def run(cli):
    """run(*args, timeout=...) -> the CompletedProcess of `interop-harness args` (text, output captured)."""
    def run_cli(*args, timeout=600):
        return subprocess.run([cli, *args], capture_output=True, text=True, timeout=timeout)
    return run_cli


def pytest_sessionfinish(session, exitstatus):
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    stats = reporter.stats if reporter is not None else {}
    if exitstatus == 0 and stats.get("skipped") and not stats.get("passed"):
        session.exitstatus = SKIPPED
