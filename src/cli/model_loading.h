// Model loading for the CLI commands: opens the GGUF, binds the weights,
// pages them in up front (with progress on a terminal) and prepares them for
// the kernels (PackedWeights), so that load time is measured once and the
// first forward pass does not pay for page faults.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/model.h"
#include "model/packed_weights.h"

namespace zl::cli {

struct LoadedModel {
  std::unique_ptr<Model> model;
  std::shared_ptr<const PackedWeights> weights;  // of *model, which must outlive them
  double t_load_ms = 0;
};

// Errors of load_model, ModelRunner::check_kernels' Unsupported (a model the
// active kernels cannot run), and ResourceExhausted "repacked weights of <path>
// need <bytes>, <available> available" when the prepared copies do not fit
// in `memory_budget` bytes (nullopt: the memory available now), checked
// before the file is paged in.
// With `in_memory`, the model is then loaded into memory and its file
// unmapped (load_into_memory, model/packed_weights.h).
Result<LoadedModel> load_model_with_progress(const std::string& path,
                                             std::optional<uint64_t> memory_budget = std::nullopt,
                                             bool in_memory = false);

// The model to use when no --model is given: $ZEROLAYER_MODEL, else the
// built-in demo model (models/zerolayer-demo.gguf) found next to the
// executable (../models/ from build/, or <prefix>/share/zerolayer/).
// NotFound, naming the places searched, when there is none.
Result<std::string> default_model_path();

}  // namespace zl::cli

