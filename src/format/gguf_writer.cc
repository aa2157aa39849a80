// GGUF writer. See gguf.h for the format and the contract.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "format/gguf.h"
#include "format/gguf_format.h"

namespace zl {

using namespace gguf_format;  // NOLINT: the format helpers

// --- writer ----------------------------------------------------------------------

namespace {

template <typename T>
void put(std::vector<uint8_t>& out, T v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  out.insert(out.end(), p, p + sizeof(T));
}

void put_string(std::vector<uint8_t>& out, std::string_view s) {
  put<uint64_t>(out, s.size());
  out.insert(out.end(), s.begin(), s.end());
}

void put_value(std::vector<uint8_t>& out, const GgufValue& v) {
  switch (v.type()) {
    case GgufValueType::kString:
      put_string(out, *v.as_string());
      return;
    case GgufValueType::kArray: {
      const GgufArray& a = *v.as_array();
      put<uint32_t>(out, static_cast<uint32_t>(a.elem_type));
      put<uint64_t>(out, a.items.size());
      for (const GgufValue& item : a.items) put_value(out, item);
      return;
    }
    default: {
      // Little-endian host: the low fixed_size() bytes of the widened bits.
      const uint64_t bits = v.raw_bits();
      const auto* p = reinterpret_cast<const uint8_t*>(&bits);
      out.insert(out.end(), p, p + fixed_size(v.type()));
      return;
    }
  }
}

Status write_all(int fd, const uint8_t* p, uint64_t n, const std::string& path) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, std::min<uint64_t>(n, 1u << 30));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return io_error(cat("cannot write ", quoted(path), ": ", std::strerror(errno)));
    p += w;
    n -= static_cast<uint64_t>(w);
  }
  return {};
}

Status write_zeros(int fd, uint64_t n, const std::string& path) {
  static const uint8_t kZeros[4096] = {};
  while (n > 0) {
    const uint64_t k = std::min<uint64_t>(n, sizeof(kZeros));
    RETURN_IF_ERROR(write_all(fd, kZeros, k, path));
    n -= k;
  }
  return {};
}

}  // namespace

void GgufWriter::set(std::string key, GgufValue value) {
  CHECK(check_name(key, "key").ok()) << "invalid GGUF key " << quoted(key);
  if (key == kAlignmentKey) {
    CHECK(value.type() == GgufValueType::kUint32 && is_pow2(value.raw_bits()))
        << kAlignmentKey << " must be a uint32 power of two";
    alignment_ = value.raw_bits();
  }
  for (auto& [k, v] : kv_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  kv_.emplace_back(std::move(key), std::move(value));
}

void GgufWriter::set_alignment(uint64_t alignment) {
  CHECK(is_pow2(alignment) && alignment <= UINT32_MAX) << "bad GGUF alignment " << alignment;
  set(kAlignmentKey, GgufValue::u32(static_cast<uint32_t>(alignment)));
}

void GgufWriter::add_tensor(std::string name, GgmlType type, std::vector<int64_t> ne, DataFn fill) {
  CHECK(check_name(name, "tensor name").ok()) << "invalid GGUF tensor name " << quoted(name);
  for (const PendingTensor& t : tensors_) CHECK(t.name != name) << "duplicate tensor " << name;
  CHECK(!ne.empty() && ne.size() <= 4) << "tensor " << name << " has " << ne.size() << " dims";
  std::optional<GgmlTypeTraits> tt = ggml_type_traits(static_cast<uint32_t>(type));
  CHECK(tt.has_value()) << "unknown ggml type " << static_cast<uint32_t>(type);
  for (int64_t n : ne) CHECK(n >= 0) << "tensor " << name << " has a negative dimension";
  CHECK(ne[0] % tt->block_size == 0) << "tensor " << name << ": row length " << ne[0]
                                     << " is not a multiple of " << tt->block_size;
  std::optional<uint64_t> n_bytes = tensor_bytes(*tt, ne.data(), static_cast<int>(ne.size()));
  CHECK(n_bytes.has_value()) << "tensor " << name << " is too large";
  tensors_.push_back({std::move(name), type, std::move(ne), *n_bytes, std::move(fill)});
}

std::vector<uint8_t> GgufWriter::header_bytes() const {
  std::vector<uint8_t> out;
  out.reserve(1 << 12);
  for (uint8_t b : kMagic) out.push_back(b);  // (insert of the array: a GCC 12 -Wstringop-overflow false positive)
  put<uint32_t>(out, kWriteVersion);
  put<uint64_t>(out, tensors_.size());
  put<uint64_t>(out, kv_.size());
  for (const auto& [key, value] : kv_) {
    put_string(out, key);
    put<uint32_t>(out, static_cast<uint32_t>(value.type()));
    put_value(out, value);
  }
  uint64_t offset = 0;  // data-section relative; each tensor starts aligned
  for (const PendingTensor& t : tensors_) {
    put_string(out, t.name);
    put<uint32_t>(out, static_cast<uint32_t>(t.ne.size()));
    for (int64_t n : t.ne) put<uint64_t>(out, static_cast<uint64_t>(n));
    put<uint32_t>(out, static_cast<uint32_t>(t.type));
    offset = align_up(offset, alignment_);
    put<uint64_t>(out, offset);
    offset += t.n_bytes;
  }
  out.resize(align_up(out.size(), alignment_), 0);
  return out;
}

std::vector<uint8_t> GgufWriter::to_bytes() const {
  std::vector<uint8_t> out = header_bytes();
  const uint64_t data_offset = out.size();
  uint64_t pos = 0;
  for (const PendingTensor& t : tensors_) {
    pos = align_up(pos, alignment_);
    out.resize(data_offset + pos + t.n_bytes, 0);
    if (t.fill) t.fill(out.data() + data_offset + pos, t.n_bytes);
    pos += t.n_bytes;
  }
  out.resize(data_offset + align_up(pos, alignment_), 0);
  return out;
}

Status GgufWriter::write(const std::string& path,
                         const std::function<void(uint64_t, uint64_t)>& progress) const {
  const std::vector<uint8_t> header = header_bytes();
  uint64_t data_bytes = 0;
  for (const PendingTensor& t : tensors_) data_bytes = align_up(data_bytes, alignment_) + t.n_bytes;
  data_bytes = align_up(data_bytes, alignment_);
  const uint64_t total = header.size() + data_bytes;

  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return io_error(cat("cannot create ", quoted(tmp), ": ", std::strerror(errno)));
  auto body = [&]() -> Status {
    RETURN_IF_ERROR(write_all(fd, header.data(), header.size(), tmp));
    uint64_t done = header.size();
    if (progress) progress(done, total);
    uint64_t pos = 0;
    for (const PendingTensor& t : tensors_) {
      RETURN_IF_ERROR(write_zeros(fd, align_up(pos, alignment_) - pos, tmp));
      pos = align_up(pos, alignment_);
      std::vector<uint8_t> buf(t.n_bytes);  // one tensor at a time, zeroed
      if (t.fill) t.fill(buf.data(), t.n_bytes);
      RETURN_IF_ERROR(write_all(fd, buf.data(), buf.size(), tmp));
      pos += t.n_bytes;
      done = header.size() + pos;
      if (progress) progress(done, total);
    }
    RETURN_IF_ERROR(write_zeros(fd, data_bytes - pos, tmp));
    if (progress && done != total) progress(total, total);
    if (::fsync(fd) != 0) {
      return io_error(cat("cannot sync ", quoted(tmp), ": ", std::strerror(errno)));
    }
    return {};
  };
  Status st = body();
  if (::close(fd) != 0 && st.ok()) {
    st = io_error(cat("cannot close ", quoted(tmp), ": ", std::strerror(errno)));
  }
  if (st.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    st = io_error(
        cat("cannot rename ", quoted(tmp), " to ", quoted(path), ": ", std::strerror(errno)));
  }
  if (!st.ok()) ::unlink(tmp.c_str());
  return st;
}

}  // namespace zl
