"""The one mutant table (megatron_adapter/mutants/), without Megatron: unique names, the adapter's rows and the
round trip's own, where each is planted, and a planted mutant's shared state made afresh."""

import sys
import types

from megatron_adapter import mutants
from megatron_adapter.mutants.table import Mutant, Patch


def test_names_are_unique_and_the_round_trips_own_are_not_served():
    names = [m.name for m in mutants.MUTANTS_TABLE]
    assert len(names) == len(set(names))
    own = {m.name for m in mutants.MUTANTS_TABLE if m.scope == "roundtrip"}
    assert own == {"reverse_gpt_layers", "swiglu_halves_swapped", "split_names_traded"}
    assert all(name not in mutants.MUTANTS for name in own) and "maps_accept_mixed" in mutants.MUTANTS
    assert {row["name"] for row in mutants.describe()} == set(names) - own


def test_each_mutant_is_planted_in_its_phase():
    saved = "distributed_optimizer_gather_keeps_bucket_padding"
    assert mutants.planted_in(saved, "save") and not mutants.planted_in(saved, "load")
    assert mutants.planted_in("reverse_gpt_layers", "load") and not mutants.planted_in("reverse_gpt_layers", "save")
    assert mutants.planted_in("no_such_mutant", "load") and not mutants.planted_in("no_such_mutant", "save")
    # a self-consistent format change is written and read alike: planted in both worlds
    assert mutants.planted_in("split_names_traded", "save") and mutants.planted_in("split_names_traded", "load")


def test_an_unknown_mutant_in_a_world_names_the_round_trips_own():
    try:
        mutants.apply_in_world("no_such_mutant", None)
    except ValueError as exc:
        assert "reverse_gpt_layers" in str(exc)
    else:
        raise AssertionError("an unknown mutant was planted")


def test_a_mutants_shared_state_is_made_afresh_each_time_it_is_planted(monkeypatch):
    module = types.ModuleType("ih_mutant_target")
    module.f, module.g = (lambda: "f"), (lambda: "g")
    monkeypatch.setitem(sys.modules, "ih_mutant_target", module)
    states = []

    def make(original, M, shared):
        states.append(shared)
        return lambda: (original(), id(shared))
    row = Mutant("ih_shared", None, "two patches, one state",
                 (Patch("ih_mutant_target:f", make), Patch("ih_mutant_target:g", make)), shared=dict)
    monkeypatch.setitem(mutants.BY_NAME, "ih_shared", row)
    mutants.apply("ih_shared", None)
    assert states[0] is states[1] and module.f()[0] == "f" and module.g()[1] == id(states[0])
    mutants.apply("ih_shared", None)
    assert states[2] is not states[0]


def test_each_row_says_whose_code_it_plants_in():
    rows = {row["name"]: row for row in mutants.describe()}
    assert {row["of"] for row in rows.values()} == {"megatron", "candidate"}
    for name, row in rows.items():
        assert row["of"] == ("candidate" if mutants.is_candidate_mutant(name) else "megatron"), name
