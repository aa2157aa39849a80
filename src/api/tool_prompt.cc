#include "api/tool_prompt.h"

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>
#include <cmath>

#include "api/json_util.h"
#include "template/value.h"

namespace zl::api {
namespace json = boost::json;
namespace {

// A double as json.dumps writes it: Python's repr (template/value.h), with
// JSON's names for the non-finite values.
std::string python_float(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  return tmpl::python_float(d);
}

void newline(std::string& out, int indent, int depth) {
  if (indent <= 0) return;
  out += '\n';
  out.append(static_cast<size_t>(indent * depth), ' ');
}

void dump(const json::value& v, int indent, int depth, std::string& out) {
  const char* item_sep = indent > 0 ? "," : ", ";
  switch (v.kind()) {
    case json::kind::null: out += "null"; return;
    case json::kind::bool_: out += v.get_bool() ? "true" : "false"; return;
    case json::kind::int64: out += std::to_string(v.get_int64()); return;
    case json::kind::uint64: out += std::to_string(v.get_uint64()); return;
    case json::kind::double_: out += python_float(v.get_double()); return;
    case json::kind::string: append_json_string(out, v.get_string()); return;
    case json::kind::array: {
      const json::array& a = v.get_array();
      if (a.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t i = 0; i < a.size(); ++i) {
        if (i > 0) out += item_sep;
        newline(out, indent, depth + 1);
        dump(a[i], indent, depth + 1, out);
      }
      newline(out, indent, depth);
      out += ']';
      return;
    }
    case json::kind::object: {
      const json::object& o = v.get_object();
      if (o.empty()) {
        out += "{}";
        return;
      }
      out += '{';
      bool first = true;
      for (const auto& [key, value] : o) {
        if (!first) out += item_sep;
        first = false;
        newline(out, indent, depth + 1);
        append_json_string(out, key);
        out += ": ";
        dump(value, indent, depth + 1, out);
      }
      newline(out, indent, depth);
      out += '}';
      return;
    }
  }
}

constexpr std::string_view kLlamaFormat =
    "Respond in the format {\"name\": function name, \"parameters\": dictionary of argument name and its value}."
    "Do not use variables.\n\n";

std::string llama3_tool_list(const std::vector<ToolDef>& tools) {
  std::string out;
  for (const ToolDef& t : tools) out += python_json_text(t.json, 4) + "\n\n";
  return out;
}

}  // namespace

ToolSyntax tool_syntax_for(ChatTemplateKind kind) {
  switch (kind) {
    case ChatTemplateKind::kChatml: return ToolSyntax::kHermes;
    case ChatTemplateKind::kLlama3: return ToolSyntax::kLlama3Json;
    default: return ToolSyntax::kNone;
  }
}

ToolPlan plan_tools(const ChatRequest& chat, ToolSyntax native) {
  ToolPlan plan;
  if (native == ToolSyntax::kNone || chat.raw_prompt || chat.tools.empty() || chat.tool_choice == "none") return plan;
  plan.syntax = native;
  for (const ToolDef& t : chat.tools) plan.names.push_back(t.name);
  plan.single_call = !chat.parallel_tool_calls;
  if (native == ToolSyntax::kQwen3CoderXml) {
    plan.string_params = std::make_shared<const tool_formats::StringParams>(tool_formats::string_params_of(chat.tools));
  }
  // A forced call opens the call in the prompt: the block syntaxes
  // (api/tool_formats.h) with their opener, the model writes the name (the
  // grammar keeps it to the named tool). Not in a prompt that continues a
  // turn, nor in one that opens none (add_generation_prompt: false).
  if (chat.continue_final_message || !chat.add_generation_prompt) return plan;
  if (tool_formats::is_block_syntax(native)) {
    if (chat.tool_choice == "any" || chat.tool_choice.starts_with("tool:")) {
      plan.prefill = std::string(tool_formats::forced_opener(native));
    }
    return plan;
  }
  const bool hermes = native == ToolSyntax::kHermes;
  const std::string open = hermes ? "<tool_call>\n{\"name\": " : "{\"name\": ";
  if (chat.tool_choice == "any") {
    plan.prefill = open + "\"";  // the model writes the name
  } else if (chat.tool_choice.starts_with("tool:")) {
    plan.prefill = open;
    append_json_string(plan.prefill, std::string_view(chat.tool_choice).substr(5));
    plan.prefill += hermes ? ", \"arguments\":" : ", \"parameters\":";
  }
  return plan;
}

std::string python_json(const json::value& v, int indent) {
  std::string out;
  dump(v, indent, 0, out);
  return out;
}

std::string python_json_text(std::string_view text, int indent) {
  boost::system::error_code ec;
  json::parse_options opts;
  opts.max_depth = kMaxJsonDepth;
  const json::value v = json::parse(text, ec, json::storage_ptr(), opts);
  return ec ? std::string(text) : python_json(v, indent);
}

std::string hermes_tools_section(const std::vector<ToolDef>& tools) {
  std::string out =
      "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
      "You are provided with function signatures within <tools></tools> XML tags:\n<tools>";
  for (const ToolDef& t : tools) out.append("\n").append(python_json_text(t.json));
  out +=
      "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
      "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
      "<args-json-object>}\n</tool_call>";
  return out;
}

std::string hermes_call(const ToolCall& call) {
  std::string out = "<tool_call>\n{\"name\": ";
  append_json_string(out, call.name);
  return out + ", \"arguments\": " + python_json_text(call.arguments_json.empty() ? "{}" : call.arguments_json) +
         "}\n</tool_call>";
}

std::string hermes_tool_response(std::string_view content) {
  return "<tool_response>\n" + std::string(content) + "\n</tool_response>";
}

std::string llama3_system_head() {
  return "Environment: ipython\nCutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n";
}

std::string llama3_tools_preamble(const std::vector<ToolDef>& tools) {
  return "Given the following functions, please respond with a JSON for a function call with its proper "
         "arguments that best answers the given prompt.\n\n" +
         std::string(kLlamaFormat) + llama3_tool_list(tools);
}

std::string llama3_tools_system(const std::vector<ToolDef>& tools) {
  return "You have access to the following functions. To call a function, please respond with JSON for a "
         "function call." +
         std::string(kLlamaFormat) + llama3_tool_list(tools);
}

std::string llama3_call(const ToolCall& call) {
  std::string out = "{\"name\": ";
  append_json_string(out, call.name);
  return out + ", \"parameters\": " + python_json_text(call.arguments_json.empty() ? "{}" : call.arguments_json) + "}";
}

}  // namespace zl::api
