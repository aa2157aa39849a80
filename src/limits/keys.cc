#include "limits/keys.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <toml++/toml.h>

#include "core/check.h"

namespace zl::limits {
namespace {

// Fetched once: EVP_sha256() would look the implementation up on every digest.
const EVP_MD* sha256_md() {
  static const EVP_MD* md = [] {
    EVP_MD* m = EVP_MD_fetch(nullptr, "SHA256", nullptr);
    return m ? static_cast<const EVP_MD*>(m) : EVP_sha256();
  }();
  return md;
}

Status file_error(const std::string& path, int64_t line, const std::string& what) {
  return invalid_argument("keys file " + path + ", line " + std::to_string(line) + ": " + what);
}

// "'field' " + what (appended: GCC 12 warns falsely on "'" + std::string(...)).
std::string field_says(std::string_view field, std::string_view what) {
  std::string m(1, '\'');
  m.append(field).append("' ").append(what);
  return m;
}

constexpr int64_t kMaxLimit = int64_t{1} << 53;

int64_t line_of(const toml::node& n) { return static_cast<int64_t>(n.source().begin.line); }

bool valid_name(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool parse_hex_digest(std::string_view hex, KeyDigest* out) {
  if (hex.size() != 2 * out->size()) return false;
  for (size_t i = 0; i < out->size(); ++i) {
    const int hi = hex_value(hex[2 * i]);
    const int lo = hex_value(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    (*out)[i] = static_cast<unsigned char>(hi * 16 + lo);
  }
  return true;
}

// The limit fields: where each goes in KeyLimits.
struct LimitField {
  std::string_view name;
  int64_t KeyLimits::*field;
};
constexpr LimitField kLimitFields[] = {
    {"requests_per_minute", &KeyLimits::requests_per_minute},
    {"input_tokens_per_minute", &KeyLimits::input_tokens_per_minute},
    {"output_tokens_per_minute", &KeyLimits::output_tokens_per_minute},
    {"max_concurrent", &KeyLimits::max_concurrent},
};

// One [[key]] table into `e`. Plaintext keys are hashed and wiped from the
// parsed document.
Status parse_entry(toml::table& t, const std::string& path, KeyEntry* e) {
  e->line = line_of(t);
  bool has_key = false;
  bool has_name = false;
  for (auto& [k, node] : t) {
    const std::string_view field = k.str();
    const int64_t line = line_of(node);
    if (field == "name") {
      const std::string* s = node.is_string() ? &node.as_string()->get() : nullptr;
      if (!s || !valid_name(*s)) {
        return file_error(path, line, "'name' must be 1 to 64 characters of A-Z a-z 0-9 . _ -");
      }
      e->name = *s;
      has_name = true;
    } else if (field == "key" || field == "key_sha256") {
      if (has_key) return file_error(path, line, "give either 'key' or 'key_sha256', not both");
      has_key = true;
      if (!node.is_string()) return file_error(path, line, field_says(field, "must be a string"));
      std::string& s = node.as_string()->get();
      if (field == "key") {
        if (s.empty()) return file_error(path, line, "'key' must not be empty");
        e->digest = sha256(s);
        OPENSSL_cleanse(s.data(), s.size());
      } else if (!parse_hex_digest(s, &e->digest)) {
        return file_error(path, line, "'key_sha256' must be 64 hex digits (the SHA-256 of the key)");
      }
    } else {
      const LimitField* lf = nullptr;
      for (const LimitField& f : kLimitFields) {
        if (f.name == field) lf = &f;
      }
      if (!lf) return file_error(path, line, "unknown field " + field_says(field, "in [[key]]"));
      const std::optional<int64_t> v = node.is_integer() ? node.value<int64_t>() : std::nullopt;
      if (!v || *v < 0) return file_error(path, line, field_says(field, "must be a non-negative integer"));
      // The buckets count in doubles: above 2^53 units a limit would lose
      // its exactness (and the headers' integers would overflow).
      if (*v > kMaxLimit) {
        return file_error(path, line, field_says(field, "must be at most " + std::to_string(kMaxLimit)));
      }
      e->limits.*(lf->field) = *v;
    }
  }
  if (!has_name) return file_error(path, e->line, "[[key]] without 'name'");
  if (!has_key) return file_error(path, e->line, "[[key]] '" + e->name + "' has neither 'key' nor 'key_sha256'");
  return {};
}

}  // namespace

KeyDigest sha256(std::string_view data) {
  KeyDigest out{};
  unsigned int n = 0;
  const int ok = EVP_Digest(data.data(), data.size(), out.data(), &n, sha256_md(), nullptr);
  CHECK(ok == 1 && n == out.size()) << "SHA-256 failed";
  return out;
}

Result<std::shared_ptr<const KeyTable>> KeyTable::parse(std::string_view text, const std::string& path) {
  // Debian's toml++ is built with exceptions: its parse errors end here.
  toml::table doc;
  try {
    doc = toml::parse(text, std::string_view(path));
  } catch (const toml::parse_error& e) {
    return file_error(path, static_cast<int64_t>(e.source().begin.line), std::string(e.description()));
  }
  auto table = std::make_shared<KeyTable>();
  for (auto& [k, node] : doc) {
    if (k.str() != "key") {
      return file_error(path, line_of(node),
                        "unknown key '" + std::string(k.str()) + "' (the file holds [[key]] tables)");
    }
    toml::array* arr = node.as_array();
    if (!arr || !arr->is_array_of_tables()) return file_error(path, line_of(node), "'key' must be [[key]] tables");
    for (toml::node& item : *arr) {
      KeyEntry e;
      RETURN_IF_ERROR(parse_entry(*item.as_table(), path, &e));
      if (auto it = table->by_name_.find(e.name); it != table->by_name_.end()) {
        return file_error(path, e.line, "name '" + e.name + "' is used twice (also line " +
                                            std::to_string(table->entries_[it->second].line) + ")");
      }
      for (const KeyEntry& other : table->entries_) {
        if (CRYPTO_memcmp(other.digest.data(), e.digest.data(), e.digest.size()) == 0) {
          return file_error(path, e.line, "[[key]] '" + e.name + "' has the same key as '" + other.name + "'");
        }
      }
      table->by_name_.emplace(e.name, table->entries_.size());
      std::array<uint64_t, 4> words;
      std::memcpy(words.data(), e.digest.data(), sizeof words);
      table->digest_words_.push_back(words);
      table->entries_.push_back(std::move(e));
    }
  }
  return std::shared_ptr<const KeyTable>(std::move(table));
}

Result<std::shared_ptr<const KeyTable>> KeyTable::load(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return io_error("keys file " + path + ": cannot be read");
  std::ostringstream ss;
  ss << f.rdbuf();
  std::string text = ss.str();
  auto table = parse(text, path);
  OPENSSL_cleanse(text.data(), text.size());  // the plaintext keys
  return table;
}

const KeyEntry* KeyTable::find(std::string_view presented) const {
  const KeyDigest d = sha256(presented);
  uint64_t w[4];
  std::memcpy(w, d.data(), sizeof w);
  // Every entry is compared, each without a branch: CRYPTO_memcmp gives the
  // same guarantee a byte at a time behind a call, ~40 ns an entry (43 µs
  // for 1000 keys, twice the admission budget: bench/admission_bench.cc).
  size_t match = entries_.size();  // none
  for (size_t i = 0; i < digest_words_.size(); ++i) {
    const std::array<uint64_t, 4>& e = digest_words_[i];
    const uint64_t diff = (e[0] ^ w[0]) | (e[1] ^ w[1]) | (e[2] ^ w[2]) | (e[3] ^ w[3]);
    const uint64_t equal = ((diff | (0 - diff)) >> 63) - 1;  // all ones when diff == 0, else 0
    match = (match & ~equal) | (i & equal);
  }
  return match < entries_.size() ? &entries_[match] : nullptr;
}

const KeyEntry* KeyTable::by_name(std::string_view name) const {
  auto it = by_name_.find(std::string(name));
  return it == by_name_.end() ? nullptr : &entries_[it->second];
}

Result<std::unique_ptr<KeyStore>> KeyStore::open(std::string path) {
  ASSIGN_OR_RETURN(auto table, KeyTable::load(path));
  return std::make_unique<KeyStore>(std::move(path), std::move(table));
}

KeyStore::KeyStore(std::string path, std::shared_ptr<const KeyTable> table)
    : path_(std::move(path)), table_(std::move(table)) {
  CHECK(table_ != nullptr);
}

std::shared_ptr<const KeyTable> KeyStore::current() const {
  std::lock_guard<std::mutex> lock(mu_);
  return table_;
}

Result<KeyReload> KeyStore::reload() {
  ASSIGN_OR_RETURN(auto next, KeyTable::load(path_));
  KeyReload r{.n_keys = next->entries().size()};
  std::lock_guard<std::mutex> lock(mu_);
  for (const KeyEntry& e : next->entries()) r.n_added += table_->by_name(e.name) ? 0 : 1;
  for (const KeyEntry& e : table_->entries()) r.n_removed += next->by_name(e.name) ? 0 : 1;
  table_ = std::move(next);
  return r;
}

}  // namespace zl::limits
