// RapidCheck generators of patterns, layouts and scenarios. All are built by construction (map,
// mapcat, build): divisibility and padding hold because the values are derived, never filtered,
// so shrinking moves toward fewer layers, fewer ranks and smaller dimensions.
#pragma once

#include <rapidcheck.h>

#include "properties/cases.h"
#include "seam/implementation.h"

namespace ih::props {

/// One of `values`, shrinking toward the first (rc::gen::element does not shrink at all).
template <class T>
rc::Gen<T> genElement(std::vector<T> values) {
  return rc::gen::map(rc::gen::inRange<std::size_t>(0, values.size()), [values](std::size_t i) { return values[i]; });
}

/// TP sizes that divide the synthetic model's dimensions: 1, 2, 4 (shrinks toward 1).
rc::Gen<std::int64_t> genTpSize();
/// GTP sizes 1-64, powers of two favoured (shrinks toward 1).
rc::Gen<std::int64_t> genGtpSize();
/// The same, at most `max_gtp` (>= 1).
rc::Gen<std::int64_t> genGtpSize(std::int64_t max_gtp);
/// pad_for_alignment in {0, 16, 32}.
rc::Gen<std::int64_t> genPadAlignment();

/// A valid GPT-pairable hybrid pattern of at most `max_blocks` blocks ('*', `mlp`, 'M' anywhere)
/// with pipes splitting it into pp * vpp segments (empty segments allowed).
rc::Gen<PatternCase> genHybridPattern(int max_blocks, char mlp);
/// A valid pattern with dense or MoE MLPs.
rc::Gen<PatternCase> genAnyHybridPattern(int max_blocks);
/// One mutation of a valid pattern aimed at one error kind of spec 1.3 / 2.2.
rc::Gen<NearValidCase> genNearValidPattern();

/// GDP or Mamba in_proj dimensions from tiny (D < p*G) to production (D = 61,760).
rc::Gen<GdpDims> genMixerDims();
/// A GTP layout: mixer dims, T, G, p (with p = 0, G divides D), C, dtype; `design` fixed. T x G
/// stays within `capacity` (unbounded: the full range, T up to 4, G up to 64).
rc::Gen<GtpCase> genGtpConfig(GtpSaveDesign design, const WorldCapacity& capacity = {});
/// A GTP save (either design) and a load at another G and p for the same in_proj; both worlds
/// within `capacity`.
rc::Gen<GtpCrossCase> genGtpCross(const WorldCapacity& capacity = {});

/// A dense and an expert grid over one world and a group source for the writer election
/// (gen_election.cc); expert sizes are divisors of the world size, by construction.
rc::Gen<ElectionCase> genElectionCase(const WorldCapacity& capacity = {});
/// A `model dump` configuration and one of its ranks (gen_model_dump.cc): GPT (layers a multiple of PP)
/// or hybrid (1-3 layers of M * - and E per pipe segment, virtual stages sometimes), TP 1/2/4, PP, EP,
/// GTP 1/2, ETP 1 or TP, experts 0/1/2/4, SwiGLU, tied, LayerNorm, the distributed or the Float16
/// optimizer (under GTP neither SwiGLU nor a hybrid model's optimizer: not compared yet, addendum I);
/// valid by construction, the world within `capacity`'s max_model_ranks (GTP, then PP, EP, ETP and TP halved
/// until it fits).
rc::Gen<ModelDumpCase> genModelDumpCase(const WorldCapacity& capacity = {});

/// genLoadCase with the hybrid side under GTP: GDP or Mamba mixers, the GDP save design, the GTP
/// size and padding of the mixers' in_proj (gen_election.cc; addendum H).
rc::Gen<LoadCase> genHybridGtpLoadCase();

/// A GPT->Hybrid load of an MoE model with one expert (E = 1; genModelCase leaves it out because of
/// the ShardedObject key-shape ambiguity it triggers; gen_election.cc, addendum G).
rc::Gen<LoadCase> genSingleExpertLoadCase();

/// A synthetic model (dense/gated/MoE) and a layout whose sizes divide it.
rc::Gen<ModelCase> genModelCase();
/// GPT saved at one layout, the hybrid model loading it at another (TP, PP, EP, ETP may change).
rc::Gen<LoadCase> genLoadCase();

/// Pipe-delimited segments over pp ranks and up to 3 virtual stages.
rc::Gen<SegmentCase> genSegmentCase();
/// An FSDP key with 0, 1 or 2 distinct module.-prefixed captures among the checkpoint keys.
rc::Gen<FsdpCase> genFsdpCase();
/// Keys of every retarget rule (layer, fresh, prefixed, final norm, omitted, unknown) for a pattern.
rc::Gen<KeyRulesCase> genKeyRulesCase();

}  // namespace ih::props
