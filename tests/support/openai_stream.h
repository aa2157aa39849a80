// Reading an OpenAI chat completion stream in the e2e tests: the content
// pieces, the finish reason and the usage chunk.
#pragma once

#include <boost/json.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "support/http_client.h"
#include "support/json_object.h"
#include "support/json_path.h"

namespace zl::test {

struct ChatStream {
  std::vector<std::string> pieces;                     // the non-empty delta contents, in order
  std::string finish_reason;                           // the last non-empty one
  int64_t prompt_tokens = -1, completion_tokens = -1;  // the usage chunk's (-1: none)
};

// Reads every event but the last (the caller checks that one, "[DONE]"): a
// chunk with no choices carries the usage, the others a delta.
inline ChatStream read_chat_stream(const std::vector<SseEvent>& ev) {
  ChatStream s;
  for (size_t i = 0; i + 1 < ev.size(); ++i) {
    boost::json::object o = parse_obj(ev[i].data);
    const boost::json::array& choices = o["choices"].as_array();
    if (choices.empty()) {
      s.prompt_tokens = num(at(o, {"usage", "prompt_tokens"}));
      s.completion_tokens = num(at(o, {"usage", "completion_tokens"}));
      continue;
    }
    const boost::json::object& c = choices[0].as_object();
    if (std::string piece = str(at(c, {"delta", "content"})); !piece.empty()) {
      s.pieces.push_back(std::move(piece));
    }
    if (std::string f = str(at(c, {"finish_reason"})); !f.empty()) s.finish_reason = std::move(f);
  }
  return s;
}

}  // namespace zl::test
