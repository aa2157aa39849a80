// zl_pack_gguf: writes a GGUF file from a manifest produced by train.py.
//
//   zl_pack_gguf MANIFEST.json OUT.gguf
//
// The manifest (JSON) lists metadata and tensors; tensor data lives in raw
// little-endian f32 files next to it (paths relative to the manifest):
//   {"metadata": [{"key": "general.name", "type": "string", "value": "..."}, ...],
//    "tensors":  [{"name": "blk.0.attn_q.weight", "type": "F16",
//                  "ne": [256, 256], "file": "blk.0.attn_q.weight.f32"}, ...]}
// Metadata types: string, bool, u32, i32, f32, string_array, f32_array,
// i32_array. Tensor types: anything quantize_row encodes (F32, F16, Q8_0, ...);
// ne is GGUF order, row length first, so a row-major torch tensor of shape
// (rows, cols) has ne [cols, rows].
//
// Bad input (an unreadable or malformed manifest, a data file of the wrong
// size) is reported on stderr with exit status 1.
#include <boost/json.hpp>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "kernels/quant.h"
#include "format/gguf.h"

namespace zl {
namespace {

namespace json = boost::json;

Result<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return io_error("cannot open " + path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// One metadata entry of the manifest as a GgufValue.
Result<GgufValue> parse_value(const std::string& key, std::string_view type, const json::value& v) {
  try {
    if (type == "string") return GgufValue::string(std::string(v.as_string()));
    if (type == "bool") return GgufValue::boolean(v.as_bool());
    if (type == "u32") return GgufValue::u32(json::value_to<uint32_t>(v));
    if (type == "i32") return GgufValue::i32(json::value_to<int32_t>(v));
    if (type == "f32") return GgufValue::f32(json::value_to<float>(v));
    if (type == "string_array") return GgufValue::string_array(json::value_to<std::vector<std::string>>(v));
    if (type == "f32_array") return GgufValue::f32_array(json::value_to<std::vector<float>>(v));
    if (type == "i32_array") return GgufValue::i32_array(json::value_to<std::vector<int32_t>>(v));
  } catch (const std::exception& e) {
    return invalid_argument("metadata '" + key + "': value does not fit type " + std::string(type) + ": " + e.what());
  }
  return invalid_argument("metadata '" + key + "': unknown type '" + std::string(type) + "'");
}

// Adds one tensor; its f32 data is read now and encoded when the file is written.
Status add_tensor(GgufWriter& w, const json::object& t, const std::filesystem::path& dir) {
  const std::string name(t.at("name").as_string());
  auto type = parse_ggml_type(std::string(t.at("type").as_string()));
  if (!type) return invalid_argument("tensor '" + name + "': unknown type");
  auto ne = json::value_to<std::vector<int64_t>>(t.at("ne"));
  if (ne.empty() || ne.size() > 4) return invalid_argument("tensor '" + name + "': 1 to 4 dimensions");
  int64_t n = 1;
  for (int64_t d : ne) {
    if (d <= 0) return invalid_argument("tensor '" + name + "': non-positive dimension");
    n *= d;
  }
  const auto traits = ggml_type_traits(static_cast<uint32_t>(*type));
  if (!traits || !traits->supported || ne[0] % traits->block_size != 0) {
    return invalid_argument("tensor '" + name + "': type cannot encode rows of " + std::to_string(ne[0]));
  }
  const std::string path = (dir / std::string(t.at("file").as_string())).string();
  ASSIGN_OR_RETURN(std::string bytes, read_file(path));
  if (bytes.size() != static_cast<size_t>(n) * sizeof(float)) {
    return invalid_argument("tensor '" + name + "': " + path + " holds " + std::to_string(bytes.size()) +
                            " bytes, expected " + std::to_string(n * sizeof(float)));
  }
  auto data = std::make_shared<std::vector<float>>(n);
  std::memcpy(data->data(), bytes.data(), bytes.size());
  const GgmlType gt = *type;
  const int64_t row = ne[0];
  w.add_tensor(name, gt, ne, [data, gt, row](uint8_t* dst, uint64_t) {
    const size_t rb = row_size(gt, row);
    const int64_t n_rows = static_cast<int64_t>(data->size()) / row;
    for (int64_t r = 0; r < n_rows; ++r) quantize_row(gt, data->data() + r * row, dst + r * rb, row);
  });
  return {};
}

Status pack(const std::string& manifest_path, const std::string& out_path) {
  ASSIGN_OR_RETURN(std::string text, read_file(manifest_path));
  boost::system::error_code ec;
  json::value root = json::parse(text, ec);
  if (ec) return invalid_argument(manifest_path + ": " + ec.message());
  const std::filesystem::path dir = std::filesystem::path(manifest_path).parent_path();
  GgufWriter w;
  try {
    for (const auto& m : root.at("metadata").as_array()) {
      const auto& o = m.as_object();
      const std::string key(o.at("key").as_string());
      ASSIGN_OR_RETURN(GgufValue v, parse_value(key, o.at("type").as_string(), o.at("value")));
      w.set(key, std::move(v));
    }
    for (const auto& t : root.at("tensors").as_array()) RETURN_IF_ERROR(add_tensor(w, t.as_object(), dir));
  } catch (const std::exception& e) {  // boost::json accessors throw on a missing key or wrong kind
    return invalid_argument(manifest_path + ": malformed manifest: " + e.what());
  }
  return w.write(out_path);
}

}  // namespace
}  // namespace zl

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: zl_pack_gguf MANIFEST.json OUT.gguf\n");
    return 2;
  }
  zl::Status s = zl::pack(argv[1], argv[2]);
  if (!s.ok()) {
    std::fprintf(stderr, "zl_pack_gguf: %s\n", s.to_string().c_str());
    return 1;
  }
  return 0;
}
