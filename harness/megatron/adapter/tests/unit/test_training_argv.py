"""The training path's argv (real_models/training_path.py) written from a model request, without Megatron:
the load run's flags (the save run's also ask Megatron's parser which flags it knows)."""

import pytest

from megatron_adapter.real_models import training_path

REQ = {"tp": 2, "pp": 1, "hidden": 64, "num_attention_heads": 4, "num_query_groups": 2, "kv_channels": 16,
       "ffn_hidden": 128, "norm": "rms", "vocab": 128, "gated_mlp": False, "add_bias": False,
       "tied_embeddings": False, "num_experts": 0, "ep": 1, "etp": 2, "gtp": 1, "model": "hybrid",
       "pattern": "*E*E", "mamba_heads": 4, "mamba_head_dim": 16, "mamba_groups": 1, "mamba_state": 16,
       "moe_ffn_hidden": 32}


def flag(argv, name):
    return argv[argv.index(name) + 1] if name in argv else None


def test_a_dense_run_names_no_experts():
    argv = training_path.argv(REQ, "load", "/ckpt", 4)
    assert "--num-experts" not in argv and "--expert-model-parallel-size" not in argv
    assert flag(argv, "--hybrid-layer-pattern") == "*E*E" and flag(argv, "--load") == "/ckpt"


def test_an_moe_run_names_the_factorys_moe_layer_and_its_expert_layout():
    argv = training_path.argv(dict(REQ, num_experts=4, ep=2, etp=1), "load", "/ckpt", 4)
    assert flag(argv, "--num-experts") == "4" and flag(argv, "--moe-ffn-hidden-size") == "32"
    assert flag(argv, "--moe-router-topk") == "1" and "--moe-router-pre-softmax" in argv
    assert flag(argv, "--expert-model-parallel-size") == "2" and flag(argv, "--expert-tensor-parallel-size") == "1"


def test_one_micro_batch_per_data_parallel_rank():
    assert flag(training_path.argv(REQ, "load", "/ckpt", 4), "--global-batch-size") == "2"
    assert flag(training_path.argv(dict(REQ, pp=2), "load", "/ckpt", 8), "--global-batch-size") == "2"


def test_a_gtp_run_names_megatrons_shard_count_over_tp_times_gtp():
    assert "--tensor-parallel-num-weight-shards" not in training_path.argv(REQ, "load", "/ckpt", 4)
    argv = training_path.argv(dict(REQ, gtp=2), "load", "/ckpt", 4)
    assert flag(argv, "--tensor-parallel-num-weight-shards") == "4"


def test_what_the_training_path_does_not_run_is_refused():
    with pytest.raises(training_path.TrainingPathError, match="EP > 1 needs experts"):
        training_path.argv(dict(REQ, ep=2), "load", "/ckpt", 4)


def test_an_older_megatrons_checkpoint_lacks_its_fields_while_saving_only():
    import types
    args = types.SimpleNamespace(gdp_num_householder=5, num_layers=4)
    groups = [{"params": [], "default_config": True, "lr": 1.0}, {"params": [], "default_config": False}]
    with training_path.fields_without([vars(args)], ["gdp_num_householder"]), \
            training_path.fields_without(groups, ["default_config"]):
        assert not hasattr(args, "gdp_num_householder") and args.num_layers == 4
        assert groups == [{"params": [], "lr": 1.0}, {"params": []}]
    assert args.gdp_num_householder == 5  # the run's own values back after the save
    assert groups == [{"params": [], "default_config": True, "lr": 1.0}, {"params": [], "default_config": False}]
    older = types.SimpleNamespace(num_layers=4)  # a Megatron before GDP: nothing to take away
    with training_path.fields_without([vars(older)], ["gdp_num_householder"]):
        assert vars(older) == {"num_layers": 4}
    assert vars(older) == {"num_layers": 4}


def test_the_live_param_groups_are_dumped_without_their_params():
    import types
    optimizer = types.SimpleNamespace(param_groups=[{"params": [1, 2], "lr": 0.5, "betas": (0.9, 0.99)}])
    assert training_path.param_groups_after_load(optimizer) == {
        "after_load_checkpoint/optimizer.param_groups.0.lr": "json:0.5",
        "after_load_checkpoint/optimizer.param_groups.0.betas": "json:[0.9, 0.99]"}
