// Fuzzes the C++ side's decoding of the adapter's JSON replies (codec/json_codec.h): layer maps,
// errors, state-dict entries and FSDP trees. Any bytes give a typed error or a value whose JSON
// form decodes back to the same value; nothing crashes, however deep or odd the document.
#include <cstddef>
#include <cstdint>
#include <string>

#include "codec/json_codec.h"
#include "fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > 64 * 1024) return 0;
  const auto document = ih::json::parse(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!document.ok()) {
    IH_FUZZ_CHECK(document.error().kind == ih::ErrorKind::bad_json, "a parse failure is bad_json");
    return 0;
  }
  namespace json = ih::json;
  if (const auto maps = json::layer_maps_from_json(*document); maps.ok()) {
    const auto again = json::layer_maps_from_json(json::layer_maps_to_json("p", *maps));
    IH_FUZZ_CHECK(again.ok() && *again == *maps, "layer maps round-trip through JSON");
  }
  const ih::Error error = json::error_from_json(*document);
  const ih::Error error_again = json::error_from_json(json::error_to_json(error));
  IH_FUZZ_CHECK(error_again.kind == error.kind && error_again.message == error.message,
                "errors round-trip through JSON");
  if (const auto leaf = json::leaf_from_json(*document); leaf.ok()) {
    const auto again = json::leaf_from_json(json::leaf_to_json(*leaf));
    IH_FUZZ_CHECK(again.ok(), "an encoded entry decodes");
  }
  if (const auto entries = json::entries_from_json(*document); entries.ok()) {
    const auto again = json::entries_from_json(json::entries_to_json(*entries));
    IH_FUZZ_CHECK(again.ok() && again->size() == entries->size(), "entries round-trip through JSON");
  }
  const ih::StateNode tree = json::tree_from_json(*document);
  const ih::StateNode tree_again = json::tree_from_json(json::tree_to_json(tree));
  IH_FUZZ_CHECK(json::dump(json::tree_to_json(tree_again)) == json::dump(json::tree_to_json(tree)),
                "trees round-trip through JSON");
  return 0;
}
