#include "api/json_util.h"

#include "core/utf8.h"

namespace zl::api {
std::string to_valid_utf8(std::string_view s) { return utf8::sanitize(s); }

}  // namespace zl::api
