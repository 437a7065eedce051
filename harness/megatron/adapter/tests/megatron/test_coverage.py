"""Coverage of the Megatron tree in the adapter's processes (gate --coverage; docs/coverage.md): the adapter
started as the harness starts it, with the coverage environment, two requests naming two gate checks, the second
one run by forked gloo world workers. coverage.py's combined JSON report must carry each line under the check that
ran it, in the adapter and in the workers, and leave a function no request reached without a line or a context.
Needs a Megatron-LM checkout with GDP and GTP (--megatron-path; ctest megatron_coverage)."""

import json
import os
import subprocess
import sys

import pytest

ADAPTER = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "adapter.py")
GDP_NAMES = ["z", "V0", "V1", "V2", "K0", "K1", "K2", "Q", "b0", "b1", "b2", "a"]
MAPS, PIECES, MAPS_AGAIN = "gate/test/maps", "gate/test/gather_pieces", "gate/test/maps_again"

pytestmark = pytest.mark.checkout


def run_adapter(tree, data_dir):
    env = dict(os.environ, IH_COVERAGE_DIR=str(data_dir), IH_COVERAGE_SOURCE=os.path.join(tree, "megatron"))
    proc = subprocess.Popen([sys.executable, ADAPTER, "--megatron-path", tree], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, env=env, text=True)

    def ask(req):
        proc.stdin.write(json.dumps(req) + "\n")
        proc.stdin.flush()
        return json.loads(proc.stdout.readline())

    try:
        assert ask({"op": "hello", "protocol": 1})["ok"]
        assert ask({"op": "pattern_maps", "pattern": "M*-M*-", "coverage_context": MAPS})["ok"]
        gtp = {"key": "decoder.layers.0.mixer.in_proj.weight", "sections": [10, 10, 10, 10, 3, 3, 3, 3, 2, 2, 2, 2],
               "names": GDP_NAMES, "tp_size": 2, "gtp_size": 2, "pad_for_alignment": 16, "cols": 2,
               "dtype": "bfloat16", "gather_storage": 100, "shard_storage": 7}
        reply = ask({"op": "gtp_pieces", "design": "gather", **gtp, "tp_rank": 1, "gtp_rank": 1,
                     "coverage_context": PIECES})
        assert reply["ok"], reply
        assert ask({"op": "pattern_maps", "pattern": "M*-M*-", "coverage_context": MAPS_AGAIN})["ok"]
    finally:
        proc.stdin.close()
        assert proc.wait(timeout=120) == 0


@pytest.fixture(scope="module")
def report(request, tmp_path_factory):
    tree = request.config.getoption("--megatron-path")
    if not tree:
        pytest.fail("this test measures a Megatron-LM checkout: run it with --megatron-path <checkout>")
    data = tmp_path_factory.mktemp("coverage")
    run_adapter(tree, data)
    files = [f for f in os.listdir(data) if f.startswith(".coverage.")]
    assert len(files) >= 1 + 4, f"the adapter and each of its 4 world workers write a data file: {files}"
    subprocess.run([sys.executable, "-m", "coverage", "combine", "--quiet", f"--data-file={data}/.coverage", str(data)],
                   check=True)
    subprocess.run([sys.executable, "-m", "coverage", "json", "--quiet", "--show-contexts",
                    f"--data-file={data}/.coverage", "-o", str(data / "coverage.json")], check=True, cwd=tree)
    with open(data / "coverage.json") as f:
        return json.load(f)["files"]


def contexts_of_function(files, path, function):
    entry = files[path]["functions"][function]
    lines = entry["executed_lines"]
    return lines, {c for line in lines for c in files[path]["contexts"].get(str(line), [])}


def test_the_adapters_own_lines_carry_its_request_check(report):
    lines, contexts = contexts_of_function(report, "megatron/core/dist_checkpointing/gpt_checkpoint_interop.py",
                                           "gpt_compatible_layer_maps")
    assert lines and MAPS in contexts and PIECES not in contexts


def test_a_line_run_again_by_a_later_check_carries_both(report):
    # sys.monitoring disables a line's event once seen; switching the context must re-enable it.
    lines, _ = contexts_of_function(report, "megatron/core/dist_checkpointing/gpt_checkpoint_interop.py",
                                    "gpt_compatible_layer_maps")
    contexts = report["megatron/core/dist_checkpointing/gpt_checkpoint_interop.py"]["contexts"]
    assert all({MAPS, MAPS_AGAIN} <= set(contexts[str(line)]) for line in lines)


def test_forked_world_workers_record_under_the_check_of_their_task(report):
    # The gather design's pieces are built by Megatron's GTP code in the world's ranks (tp 2 x gtp 2).
    for path in ("megatron/core/tensor_parallel/generalized_tensor_parallelism.py",
                 "megatron/core/ssm/gated_delta_product.py"):
        assert any(PIECES in c for c in report[path]["contexts"].values()), path
        assert not any(MAPS in c for c in report[path]["contexts"].values()), path


def test_a_function_no_request_reached_has_no_line_and_no_check(report):
    lines, contexts = contexts_of_function(report, "megatron/training/checkpointing.py", "load_checkpoint")
    assert lines == [] and contexts == set()
    assert report["megatron/training/checkpointing.py"]["functions"]["load_checkpoint"]["missing_lines"]
