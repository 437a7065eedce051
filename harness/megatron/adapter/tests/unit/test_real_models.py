"""The real-model factory's and the round trips' pure parts (real_models/), without Megatron: what a request asks
the factory to build, which patch families building it needs, the layout a distributed round trip claims, and
how the load's record of the chunks' state dicts is kept."""

import types

import pytest

from megatron_adapter.real_models import factory, roundtrip_models

GPT = {"model": "gpt", "layers": 2, "pattern": "", "pp": 1, "optimizer": False}
HYBRID = dict(GPT, model="hybrid", pattern="M*-|M*-|M*-|M*-/MM")


def test_request_fields_added_later_have_their_defaults():
    assert factory.field({}, "mixer") == "mamba" and factory.field({}, "gdp_householder") == 3
    assert factory.field({"mixer": "gdp"}, "mixer") == "gdp"


def test_a_hybrids_virtual_stages_are_its_pipe_segments_beyond_pp():
    assert factory.virtual_stages(GPT) is None
    assert factory.virtual_stages(dict(HYBRID, pp=2)) == 2 and factory.virtual_stages(dict(HYBRID, pp=4)) is None
    assert factory.virtual_stages(dict(HYBRID, pattern="M*-M*-")) is None


def test_the_patch_families_follow_the_models_parts():
    assert factory.patch_families(GPT) == ("model",)
    assert factory.patch_families(dict(GPT, optimizer=True)) == ("model", "model_optimizer")
    assert factory.patch_families(dict(HYBRID, mixer="gdp", optimizer=True)) == ("model", "model_gdp", "model_optimizer")


def test_a_layer_the_local_spec_has_not_is_unsupported():
    with pytest.raises(factory.UnsupportedConfig, match="no layer for D, G"):
        factory.require_buildable(dict(HYBRID, pattern="M*DG"))
    factory.require_buildable(dict(HYBRID, pattern="M*-E|M*-E"))


def test_context_parallelism_with_attention_is_unsupported_and_without_it_builds():
    assert factory.field({}, "cp") == 1
    for req in (dict(GPT, cp=2), dict(HYBRID, pattern="M-M*", cp=2)):
        with pytest.raises(factory.UnsupportedConfig, match="Context parallelism is only supported by TEDot"):
            factory.require_buildable(req)
    factory.require_buildable(dict(HYBRID, pattern="M-M-", cp=2))
    factory.require_buildable(dict(GPT, cp=1))


def _bucketed(*buffers):
    """A DistributedOptimizer stand-in whose gradient buffers hold buckets of (elements, of them unpadded)."""
    bucket = lambda n, u: types.SimpleNamespace(grad_data=types.SimpleNamespace(numel=lambda: n),  # noqa: E731
                                                numel_unpadded=u)
    return types.SimpleNamespace(buffers=[types.SimpleNamespace(buckets=[bucket(*b) for b in buf]) for buf in buffers])


def test_a_distributed_round_trip_needs_end_padding_before_the_last_bucket():
    roundtrip_models._require_padded_buckets(_bucketed([(64, 60), (64, 64)]))
    for unpadded in (_bucketed([(64, 64), (64, 60)]), _bucketed([(64, 60)])):
        with pytest.raises(roundtrip_models.RealModelPlanError, match="no end padding before the last"):
            roundtrip_models._require_padded_buckets(unpadded)
    chain = types.SimpleNamespace(chained_optimizers=[_bucketed([(8, 8)]), _bucketed([(64, 60), (64, 64)])])
    roundtrip_models._require_padded_buckets(chain)  # any part of a chain may carry it


def test_only_a_distributed_optimizer_request_is_distributed():
    assert roundtrip_models.is_distributed({"optimizer": True, "optimizer_kind": "distributed"})
    assert not roundtrip_models.is_distributed({"optimizer": True, "optimizer_kind": "fp32"})
    assert not roundtrip_models.is_distributed({"optimizer": False, "optimizer_kind": "distributed"})


def test_recording_loads_records_what_each_chunk_is_handed_and_undoes_itself():
    from megatron_adapter.real_models import training_path

    class Chunk:
        def __init__(self):
            self.took = None

        def load_state_dict(self, state_dict, strict=True):
            self.took = state_dict
    chunks = {"model0": Chunk(), "model1": Chunk()}
    with training_path.recording_loads(chunks) as seen:
        chunks["model1"].load_state_dict({"w": 1})
    assert seen == {"model1": {"w": 1}} and chunks["model1"].took == {"w": 1}
    assert "load_state_dict" not in vars(chunks["model1"])  # the class's own method again
    assert training_path.chunk_list({"model1": 1, "model0": 0}) == [0, 1]


def test_object_values_refuses_a_path_that_is_no_linears_extra_state():
    from megatron_adapter.real_models import training_path
    with pytest.raises(training_path.TrainingPathError, match="no linear's _extra_state"):
        with training_path.object_values({"model": object()}, {"model.decoder.weight": "x"}):
            pass
