// Model loading for the CLI commands: opens the GGUF, binds the weights and
// pages them in up front (with progress on a terminal), so that load time is
// measured once and the first forward pass does not pay for page faults.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/model.h"

namespace zl::cli {

struct LoadedModel {
  std::unique_ptr<Model> model;
  double t_load_ms = 0;
};

Result<LoadedModel> load_model_with_progress(const std::string& path);

// The model to use when no --model is given: $ZEROLAYER_MODEL, else the
// built-in demo model (models/zerolayer-demo.gguf) found next to the
// executable (../models/ from build/, or <prefix>/share/zerolayer/).
// NotFound, naming the places searched, when there is none.
Result<std::string> default_model_path();

}  // namespace zl::cli

