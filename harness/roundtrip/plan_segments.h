// The plan's unit of provenance: a segment, a run of a local tensor's rows that holds a run of one key's global
// rows. The plan gives every rank the segments of each path it fills or loads; the workers fill them with the
// oracle's values (oracle_encoding.h) and the verifier expects them. Here: segments of tensors and factories, the
// GTP windows of them, and the plan's files.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "codec/json_codec.h"
#include "harness/roundtrip/oracle_encoding.h"
#include "models/gtp_layout.h"
#include "models/sharded_tensor.h"
#include "models/state_tree.h"

namespace ih {

/// A run of local rows [begin, begin + rows) of a local tensor whose element (r, c...) holds key
/// `key`'s element (offset[:p], offset[p] + r - begin, offset[p+1] + c, ...).
struct Segment {
  std::int64_t begin = 0, rows = 0;
  std::string key;
  Shape global_shape, global_offset;
  std::int64_t prepend = 0;
  bool operator==(const Segment&) const = default;
};

/// A segment as the plan writes it: [begin, rows, key id, global shape, global offset, prepend].
json::Json segment_json(const Segment& s, std::int64_t key_id);
/// The whole of a tensor entry, one segment.
Segment whole_tensor(const ShardedTensor& t);

/// Segments of a factory's local data: each built tensor's rows are views of the factory's data
/// (reference build), so row block b of built tensor x maps data rows [b.first_row, +b.rows) to
/// x's global rows from x.global_offset[p] + (rows of x before b). Zero blocks (padding) map
/// nothing: those rows are expected to be zero.
///
/// A factory without data is a real model's, decoded from Megatron's `model dump` (its built tensors
/// only): its local data is taken as its built tensors' rows one after the other, which is how
/// Megatron's SwiGLU and split factories chunk their weight. The workers check that on the real
/// factory before they fill or verify it (a different layout is a harness error, never a finding).
Result<std::vector<Segment>> factory_segments(const ShardedTensorFactory& f);
/// Whether the factory's chunks are this rank's to write: its replica id, or for a real model's factory
/// (decoded without one) its built tensors' (all main, e.g. a split factory replicated over GTP on
/// GTP rank 0 only).
Result<bool> factory_is_main(const ShardedTensorFactory& f);
/// The factory's local data shape; for a real model's factory (no data), its built tensors stacked on rows.
Result<Shape> factory_local_shape(const ShardedTensorFactory& f);

/// Segments of rows [first, first + rows) of a local tensor, renumbered from 0 (a GTP shard of the
/// TP-local rows): the given segments clipped to the window.
std::vector<Segment> window(const std::vector<Segment>& segs, std::int64_t first, std::int64_t rows);

/// A segment of the rows an entry holds before the retarget, moved to where the retarget put that entry
/// (`post`, a segment of the retargeted entry): its key and prepended axes, the segment's own axes after
/// its prepended ones (a retarget renames and prepends axes, nothing else).
Segment retargeted_segment(const Segment& pre, const Segment& post);

/// A GTP in_proj shard under the gather design: the reference factory's segments over the gathered
/// (D, C) rows, and the (R, C) shard's rows, the window [g R, (g+1) R) of them (rows past D: padding,
/// covered by no segment).
struct GatheredShard {
  std::vector<Segment> gathered, shard;
  Shape shard_shape;
  ShardedTensorFactory factory;  // the reference's gather factory
};
/// The gathered shard of `params` (its `shard` is set here).
Result<GatheredShard> gathered_shard(GtpFactoryParams params);

/// Elements of a shape (saturating at INT64_MAX).
std::int64_t numel(const Shape& shape);
/// "a,b,c": an offset in an object's oracle string.
std::string offset_text(const Shape& offset);
/// What the save writes into an object and the load must give back: "oracle-object|<key>|<offset>".
std::string oracle_object_text(const ShardedObject& object);
/// Whether an object carries Megatron's own value (a real DistributedOptimizer's common state in a per-DP-group
/// object): the plan leaves it in place, and the load must give back what the save world saved under its key.
bool carries_value(const ShardedObject& object);
/// Marks in `bits` (one per element of the segment's key) the elements a loaded local tensor of `local_shape`
/// holds through `segment` (its JSON, segment_json); returns how many it walked.
std::int64_t mark_covered(std::vector<char>& bits, const json::Json& segment, const Shape& local_shape);

/// A saved chunk: its key and global offset.
using Chunk = std::pair<std::string, Shape>;
/// Whose description of the save ranks' entries a plan follows: the reference's (a fault there is a plan bug) or
/// a real model's, Megatron's own (a layout there that is not the reference's is Megatron's, description_disagrees).
enum class DescribedBy { reference, megatron };

/// The catalogue's "writers": [key, offset, the rank that writes it] for each chunk of `main_replicas` (chunk ->
/// the save ranks holding its main replica: exactly one each), and the chunk's holders after them where `holders`
/// is given (a fully parallel save hands a replica to any one of them). Several main replicas of a chunk are a plan
/// bug (harness_error) in the reference's description, description_disagrees in Megatron's.
Result<json::Json> expected_writers_json(const std::map<Chunk, std::vector<std::int64_t>>& main_replicas,
                                         const std::map<Chunk, std::set<std::int64_t>>* holders = nullptr,
                                         DescribedBy described_by = DescribedBy::reference);

/// One of the plan's files: the JSON on one line.
Status write_plan_file(const std::filesystem::path& path, const json::Json& value);
/// Creates the scenario's folder (harness_error when it cannot).
Status create_plan_dir(const std::filesystem::path& dir);
/// The scenario's catalogue.json: the oracle's encoding, the saved keys (ids from 1), the fresh keys (ids after
/// them), the aliases of a distributed optimizer's `param` states, the expected writers (and whether the save
/// must spread them, WorldScenario::save_spreads_writes), the saved common values and how many saved elements no
/// load rank reads.
struct Catalogue {
  OracleEncoding encoding;
  json::Json keys, fresh_keys, aliases, writers, saved_plain;
  std::int64_t uncovered_elements = 0;
  bool spread_writes = false;
};
Status write_catalogue(const std::filesystem::path& dir, const Catalogue& catalogue);

}  // namespace ih
