#include "cli/model_loading.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>

#include "core/progress.h"
#include "model/runner.h"  // ModelRunner::check_kernels

namespace zl::cli {

Result<LoadedModel> load_model_with_progress(const std::string& path, std::optional<uint64_t> memory_budget,
                                             bool in_memory) {
  const auto t0 = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(auto model, load_model(path));
  RETURN_IF_ERROR(ModelRunner::check_kernels(*model));  // refused now, not on every request
  const PackOptions pack{.name = path, .available = memory_budget};
  RETURN_IF_ERROR(PackedWeights::check_fits(*model, pack));
  const uint64_t total = model->n_weight_bytes();
  Progress progress("loading " + path, total);
  uint64_t done = 0;
  volatile uint8_t sink = 0;
  for (const auto& t : model->file->tensors()) {
    for (uint64_t off = 0; off < t.n_bytes; off += 4096) {
      sink = sink + t.data[off];
      if ((off & ((16u << 20) - 1)) == 0) progress.update(done + off);
    }
    done += t.n_bytes;
  }
  progress.finish();
  LoadedModel out;
  ASSIGN_OR_RETURN(out.weights, PackedWeights::create(*model, pack));
  if (in_memory) RETURN_IF_ERROR(load_into_memory(*model, *out.weights).with_context(path));
  out.model = std::move(model);
  out.t_load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

Result<std::string> default_model_path() {
  if (const char* env = std::getenv("ZEROLAYER_MODEL"); env && *env) return std::string(env);
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  std::vector<fs::path> candidates;
  if (!ec) {
    const fs::path dir = exe.parent_path();
    candidates = {dir / "models", dir.parent_path() / "models", dir.parent_path() / "share" / "zerolayer"};
  }
  std::string searched;
  for (const auto& c : candidates) {
    const fs::path p = c / "zerolayer-demo.gguf";
    if (fs::exists(p, ec)) return p.lexically_normal().string();
    searched += (searched.empty() ? "" : ", ") + p.lexically_normal().string();
  }
  return not_found("no --model given and the built-in demo model was not found (searched $ZEROLAYER_MODEL, " +
                   searched + ")");
}

}  // namespace zl::cli
