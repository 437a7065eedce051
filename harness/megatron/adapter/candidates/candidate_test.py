#!/usr/bin/env python3
"""Unit tests of the candidate shard-split design (not Megatron's code) against a Megatron checkout:
the factory on the review's TP = 2 case (spec 4.9) and the unit-test mixer's case (spec 4.10),
compared with Megatron's own non-GTP split factory; the all-padding rank's placeholder through
Megatron's load preprocessing; each candidate_* mutant failing at least one of these; and a
checkout's own factory winning over the candidate.

  candidate_test.py --megatron-path DIR     (unittest; exit 0 all passed, 1 a failure)
"""

import argparse
import os
import sys
import unittest
from collections import defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
ADAPTER = os.path.dirname(HERE)
sys.path.insert(1, ADAPTER)

M = None  # the adapter's Megatron namespace (load_megatron)


def _layout(d_inner, group_state, nheads, householder):
    return M.gdp._get_in_proj_checkpoint_split_layout(d_inner, group_state, nheads, householder)


def _shards(full, G, pad_for_alignment):
    """The G GTP shards of a TP-local tensor, zero-padded at the tail (spec 4.4)."""
    torch = M.torch
    D = full.shape[0]
    A = pad_for_alignment * G
    pad = (A - D % A) % A if A else 0
    padded = torch.nn.functional.pad(full, (0, 0, 0, pad))
    R = padded.shape[0] // G
    return [padded[g * R:(g + 1) * R] for g in range(G)], R


def build_case(sections, names, T, G, p, cols=2, factory=None):
    """{key: [pieces sorted by offset]} over every (t, g), the non-GTP chunks {key: [chunks]}, and
    [(t, g, shard, factory)]."""
    import candidates.shard_split as ss
    torch = M.torch
    make = factory or (lambda *a: ss.gtp_split_tensor_factory(M, *a))
    D = sum(sections)
    actual, expected, made = defaultdict(list), defaultdict(list), []
    for t in range(T):
        full = torch.arange(D * cols, dtype=torch.float32).reshape(D, cols) + 1000 * (t + 1)
        ref = M.ShardedTensor.from_rank_offsets("w", full, (0, t, T))
        for chunk in M.ssm_utils._split_tensor_factory(ref, sections, names, 0).build():
            expected[chunk.key].append(chunk)
        shards, R = _shards(full, G, p)
        for g, shard in enumerate(shards):
            orig = M.ShardedTensor.from_rank_offsets("w", shard, (0, t * G + g, T * G))
            f = make(orig, sections, names, g, t, T)
            built = f.build()
            made.append((t, g, shard, f, built))
            for piece in built if isinstance(built, list) else []:
                actual[piece.key].append(piece)
    for key in actual:
        actual[key].sort(key=lambda c: c.global_offset)
    return actual, expected, made


class CandidateFactory(unittest.TestCase):
    cases = {
        "review TP=2 (spec 4.9)": ((10, 3, 2, 3), 2, 2, 16),
        "unit-test mixer (spec 4.10)": ((256, 256, 4, 3), 1, 2, 32),
        "all-padding ranks (rows < p*G)": ((2, 1, 1, 1), 2, 4, 4),
    }

    def check_tiles_like_non_gtp(self, layout, T, G, p):
        sections, names = _layout(*layout)
        actual, expected, made = build_case(sections, names, T, G, p)
        self.assertEqual(sorted(actual), sorted(expected), "keys differ from the non-GTP run's")
        for key, refs in expected.items():
            end = 0
            for piece in actual[key]:
                self.assertEqual(piece.global_shape, refs[0].global_shape, key)
                self.assertEqual(piece.global_offset, (end, 0), f"{key}: hole or overlap at {end}")
                self.assertIsNone(piece.axis_fragmentations, key)
                end += piece.local_shape[0]
            self.assertEqual(end, refs[0].global_shape[0], f"{key}: pieces do not reach the end")
            M.torch.testing.assert_close(M.torch.cat([c.data for c in actual[key]]),
                                         M.torch.cat([c.data for c in sorted(refs, key=lambda c: c.global_offset)]))
        D = sum(sections)
        for t, g, shard, f, built in made:
            R = shard.shape[0]
            real = max(0, min(R, D - g * R))
            if real == 0:
                self.assertIsInstance(built, M.LocalNonpersistentObject, f"all-padding rank ({t}, {g})")
                self.assertEqual(built.unwrap().numel(), 0)
                merged = f.merge_fn(built.unwrap())
            else:
                for piece in built:
                    self.assertEqual(piece.data.untyped_storage().data_ptr(), shard.untyped_storage().data_ptr(),
                                     "a piece is a copy, not a view of the shard")
                self.assertEqual(sum(c.local_shape[0] for c in built), real, "pad rows saved or real rows lost")
                merged = f.merge_fn([c.data.clone() for c in built])
            M.torch.testing.assert_close(merged, shard)  # pad rows of a healthy shard are zero

    def test_review_tp2(self):
        self.check_tiles_like_non_gtp(*self.cases["review TP=2 (spec 4.9)"])

    def test_unit_mixer(self):
        self.check_tiles_like_non_gtp(*self.cases["unit-test mixer (spec 4.10)"])

    def test_all_padding_ranks(self):
        self.check_tiles_like_non_gtp(*self.cases["all-padding ranks (rows < p*G)"])

    def test_placeholder_survives_load_preprocessing(self):
        """Megatron's own load_preprocess puts the unwrapped placeholder at the factory's path, and
        the merge turns it into a zero (R, C) shard of the placeholder's dtype."""
        from megatron.core.dist_checkpointing.state_dict_utils import load_preprocess
        sections, names = _layout(2, 1, 1, 1)
        _, _, made = build_case(sections, names, 1, 4, 4)
        t, g, shard, f, built = made[-1]
        self.assertIsInstance(built, M.LocalNonpersistentObject)
        sharded, nonpersistent, factories = load_preprocess({"mixer": {"in_proj.weight": f}})
        value = nonpersistent["mixer"]["in_proj.weight"]
        self.assertEqual(tuple(value.shape), (0, 2))
        merged = factories["mixer"]["in_proj.weight"].merge_fn(value)
        self.assertEqual(tuple(merged.shape), tuple(shard.shape))
        self.assertEqual(int(merged.abs().sum()), 0)
        self.assertNotIn("in_proj.weight", sharded.get("mixer", {}))


class CandidateMutantsFail(unittest.TestCase):
    """Every candidate_* mutant breaks at least one of the factory checks above."""

    def test_each_mutant_fails_a_check(self):
        from megatron_adapter import mutants
        import candidates.shard_split as ss
        names = [m.name for m in mutants.MUTANTS_TABLE if m.name.startswith("candidate_")]
        self.assertEqual(len(names), 6, names)
        for name in names:
            saved = {attr: getattr(ss, attr) for attr in dir(ss) if attr.startswith("_") and callable(getattr(ss, attr))}
            mutants.apply(name, M)
            try:
                failed = []
                for label, case in CandidateFactory.cases.items():
                    try:
                        CandidateFactory("test_review_tp2").check_tiles_like_non_gtp(*case)
                    except (AssertionError, Exception) as exc:  # noqa: BLE001 - a failure of any kind kills it
                        failed.append(f"{label}: {type(exc).__name__}")
                self.assertTrue(failed, f"mutant {name} survives every factory check")
            finally:
                for attr, value in saved.items():
                    setattr(ss, attr, value)


class RealFactoryWins(unittest.TestCase):
    def test_checkout_factory_preferred(self):
        """A checkout with its own factory (stubbed here into its GDP module) is gated as it is."""
        import candidates
        import candidates.shard_split as ss

        def stub(orig, sections, names, gtp_rank, tp_rank, tp_size):
            return None
        setattr(M.gdp, candidates.REAL_GTP_SPLIT_FACTORY.name, stub)
        saved = M.candidate
        try:
            self.assertIs(candidates.find_real_gtp_split_factory(M), stub)
            report = ss.install(M)
            self.assertFalse(report["applied"])
            self.assertIn(candidates.REAL_GTP_SPLIT_FACTORY.name, report["reason"])
            M.candidate = {"applied": True}  # even where the candidate was applied, the adapter's ops use the checkout's
            self.assertIs(M.find_gtp_split_factory(), stub)
        finally:
            delattr(M.gdp, candidates.REAL_GTP_SPLIT_FACTORY.name)
        self.assertIsNone(candidates.find_real_gtp_split_factory(M))
        self.assertIs(M.find_gtp_split_factory().func, ss.gtp_split_tensor_factory)  # no factory: the candidate's
        M.candidate = saved


def main():
    global M
    ap = argparse.ArgumentParser()
    ap.add_argument("--megatron-path", required=True)
    args, rest = ap.parse_known_args()
    from megatron_adapter.megatron_import import load_megatron
    M = load_megatron(args.megatron_path)
    prog = unittest.main(argv=[sys.argv[0]] + rest, exit=False, verbosity=2)
    return 0 if prog.result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
