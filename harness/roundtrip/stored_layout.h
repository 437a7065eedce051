// The stored bytes against the reference's layout (docs/roundtrip.md, "Stored bytes"). After a real save the
// save world's rank 0 reads the checkpoint back with PyTorch DCP's own reader (its metadata and every stored
// chunk) and reports what is stored: each chunk's key, offsets, sizes and values. Every value the save ranks
// filled names an element (oracle_encoding.h), so what each stored element must hold is known: element g of
// key K holds K's own value g, except where the reference lays a key's rows out otherwise than the model's
// description the fills came from (a remap: those rows must hold the values of the parameter rows the reference
// puts there). A chunk that holds anything else is named with its key, its offsets and its first wrong elements.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "codec/json_codec.h"
#include "harness/roundtrip/oracle_encoding.h"
#include "harness/roundtrip/plan_segments.h"

namespace ih {

/// A remap's source_id for rows the reference stores nowhere (pad rows): no stored chunk may hold them.
inline constexpr std::int64_t kNoElement = 0;

/// Elements offset + d (d < extent, per axis) of `key` must hold the values of `source_id`'s elements
/// source_offset + d (the source key of global shape source_shape); with source_id kNoElement, they must not be
/// stored at all.
struct StoredRemap {
  std::string key;
  Shape offset, extent;
  std::int64_t source_id = 0;
  Shape source_shape, source_offset;
  bool operator==(const StoredRemap&) const = default;
};

/// What the stored chunks are judged against: the oracle's encoding, each saved key's id and global shape (a
/// distributed optimizer's `param` states under their parameter's id), and the remaps.
struct StoredLayout {
  OracleEncoding encoding;
  std::map<std::string, std::pair<std::int64_t, Shape>> keys;
  std::vector<StoredRemap> remaps;
};

/// One stored chunk as DCP's reader returned it: its values row-major.
struct ReadBackChunk {
  std::string key;
  Shape offset, sizes;
  std::vector<double> values;
};

struct StoredVerdict {
  std::int64_t chunks = 0, elements_checked = 0, wrong = 0;
  std::vector<std::string> first_wrong;  // at most two per chunk, eight in all
};

/// Every element of every chunk against what the layout says it must hold.
StoredVerdict judge_stored_chunks(const std::vector<ReadBackChunk>& chunks, const StoredLayout& layout);

/// Where a factory's data rows are stored by the reference, when it is a SwiGLU fc1 (two built tensors of one
/// key, halves W and V of the data rows, fragmented 2T on their row axis): W at fragment t, V at fragment t + T,
/// t taken modulo T from W's fragment as described. The remaps of the rows whose described place (`fill`: the
/// plan's segments of the factory's data) is not the reference's; none for any other factory. `ids` names each
/// key's id and global shape; `row_tail` is the data's shape after its row axis.
std::vector<StoredRemap> swiglu_reference_remaps(const std::vector<Segment>& fill, const Shape& row_tail,
                                                 const std::map<std::string, std::int64_t>& ids);

/// Where the reference stores a factory's data rows when its own build of the same factory is known (`reference`:
/// its segments over the same local rows, e.g. a Mamba or GDP in_proj split factory): the remaps of the rows whose
/// described place (`fill`) is not the reference's, so the stored chunks are held to the reference's chunk names and
/// rows, not to Megatron's description. A fill row the reference does not store (a pad row) is remapped to
/// kNoElement: a chunk holding it is wrong. description_disagrees
/// when the reference stores rows under a key the save world does not write, or on other prepended axes.
Result<std::vector<StoredRemap>> reference_remaps(const std::vector<Segment>& fill,
                                                  const std::vector<Segment>& reference, const Shape& row_tail,
                                                  const std::map<std::string, std::int64_t>& ids);

/// The remaps as the plan writes them (stored_layout.json's "remaps"), and back.
json::Json remaps_json(const std::vector<StoredRemap>& remaps);
/// The layout of a scenario: its catalogue.json (encoding, keys, aliases) and its stored_layout.json.
Result<StoredLayout> stored_layout_from_json(const json::Json& catalogue, const json::Json& stored_layout);
/// The chunks the save world's rank 0 reported (stored_chunks.json: {"chunks": [{key, offset, sizes, values}]}).
Result<std::vector<ReadBackChunk>> stored_chunks_from_json(const json::Json& document);

}  // namespace ih
