// API keys with per-key limits: the `--keys FILE` table (TOML), its lookup,
// and its reload on SIGHUP.
//
//   [[key]]
//   name = "team-a"                 # tenant: metrics, logs, prefix-cache salt
//   key = "sk-team-a-..."           # or key_sha256 = "<64 hex digits>"
//   requests_per_minute = 60        # absent or 0: unlimited
//   input_tokens_per_minute = 200000
//   output_tokens_per_minute = 40000
//   max_concurrent = 8
//
// Rules (each violation is an InvalidArgument naming the file and the line):
// a TOML syntax error; a top-level key other than `key`; an entry key other
// than those above; `name` missing, not [A-Za-z0-9._-]{1,64} or used twice;
// neither or both of `key` and `key_sha256`; an empty `key`; a `key_sha256`
// that is not 64 hex digits; the same key in two entries; a limit that is
// not a non-negative integer.
//
// Secrets: a plaintext `key` is hashed (SHA-256) as the file is read and
// dropped; the table holds digests only, and no error message or log line
// quotes a key.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"

namespace zl::limits {

using KeyDigest = std::array<unsigned char, 32>;

// SHA-256 of `data` (OpenSSL EVP). About 0.3 µs for a short key.
KeyDigest sha256(std::string_view data);

// A key's limits; 0: unlimited.
struct KeyLimits {
  int64_t requests_per_minute = 0;
  int64_t input_tokens_per_minute = 0;
  int64_t output_tokens_per_minute = 0;
  int64_t max_concurrent = 0;  // generations in progress at once (n per OpenAI request of n choices), in this process

  bool operator==(const KeyLimits&) const = default;
};

struct KeyEntry {
  std::string name;  // [A-Za-z0-9._-]{1,64}: never contains ':' or '/'
  KeyDigest digest{};
  KeyLimits limits;
  int64_t line = 0;  // where the entry starts in its file
};

// One loaded file. Immutable once built: share it freely between threads.
class KeyTable {
 public:
  // Parses TOML `text`; `path` only names the file in errors.
  static Result<std::shared_ptr<const KeyTable>> parse(std::string_view text, const std::string& path);
  // Reads and parses the file at `path`.
  static Result<std::shared_ptr<const KeyTable>> load(const std::string& path);

  // The entry whose key is `presented`, or null. Cost: one SHA-256 of the
  // presented key (~0.3 µs), then a branch-free compare with every entry's
  // digest (all of them, no early exit: the time does not say which entry
  // matched, nor how much of a digest did; ~1 ns an entry).
  const KeyEntry* find(std::string_view presented) const;
  // The entry named `name`, or null (a hash lookup).
  const KeyEntry* by_name(std::string_view name) const;
  const std::vector<KeyEntry>& entries() const { return entries_; }

 private:
  std::vector<KeyEntry> entries_;
  // entries_[i].digest as four words, contiguous: the scan reads 32 bytes an entry.
  std::vector<std::array<uint64_t, 4>> digest_words_;
  std::unordered_map<std::string, size_t> by_name_;
};

// What a reload changed, for the log line.
struct KeyReload {
  size_t n_keys = 0;
  size_t n_added = 0;    // names not in the previous table
  size_t n_removed = 0;  // names of the previous table that are gone
};

// The current table of a keys file, replaced as a whole on reload.
// Thread-safe: current() copies a shared_ptr under a mutex (a reader keeps
// the table it got, whatever reloads happen meanwhile); reload() parses
// outside the mutex and swaps under it.
class KeyStore {
 public:
  // Loads `path` (the first load's errors are the caller's: serve refuses to start).
  static Result<std::unique_ptr<KeyStore>> open(std::string path);
  // A store over an already parsed table (tests, benchmarks); reload() re-reads `path`.
  KeyStore(std::string path, std::shared_ptr<const KeyTable> table);

  std::shared_ptr<const KeyTable> current() const;
  const std::string& path() const { return path_; }
  // Re-reads the file. On success the new table replaces the old one for
  // every later current(); on error the old table stays and the error
  // (naming file and line) is returned.
  Result<KeyReload> reload();

 private:
  std::string path_;
  mutable std::mutex mu_;
  std::shared_ptr<const KeyTable> table_;
};

}  // namespace zl::limits
