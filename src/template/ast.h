// The parsed form of a Jinja template (template/jinja.h): a tree of
// statements (Node) holding expressions (Expr). Built by parse.cc, walked
// by render.cc; immutable once built.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "template/value.h"

namespace zl::tmpl {

struct Expr;
using ExprP = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,   // value
    kName,      // name
    kList,      // args: items
    kDict,      // args: key, value, key, value…
    kUnary,     // name: "-", "+", "not"; args[0]
    kBinary,    // name: the operator ("+", "==", "in", "not in", "and", "~", …); args[0], args[1]
    kTernary,   // args: then, condition, else (may be null)
    kGetAttr,   // args[0]; name: the attribute
    kGetItem,   // args[0][args[1]]
    kSlice,     // args: object, start, stop, step (each but the object may be null)
    kCall,      // args[0](args[1..], kwargs)
    kFilter,    // args[0] | name(args[1..], kwargs)
    kTest,      // args[0] is [not] name(args[1..]); negated
  };
  Kind kind;
  int line = 0;
  Value value;
  std::string name;
  std::vector<ExprP> args;
  std::vector<std::pair<std::string, ExprP>> kwargs;
  bool negated = false;
};

struct Node;
using NodeP = std::unique_ptr<Node>;
using Body = std::vector<NodeP>;

struct Node {
  enum class Kind {
    kText,         // text
    kOutput,       // {{ expr }}
    kIf,           // branches: (condition or null for else, body)
    kFor,          // targets in expr [if cond]: body, else_body; recursive
    kSet,          // targets = expr, or target_expr (ns.attr) = expr
    kSetBlock,     // targets[0] = rendered body, through `expr` (filters on __body__) when set
    kMacro,        // name(params): body
    kCallBlock,    // {% call(params) expr %}body: body is the caller macro
    kFilterBlock,  // expr (filters on __body__) applied to the rendered body
    kBreak,
    kContinue,
    kDo,           // expr, result dropped
    kBlock,        // body rendered as it is (generation blocks, the root)
  };
  Kind kind;
  int line = 0;
  std::string text;
  std::string name;
  ExprP expr;
  ExprP cond;
  ExprP target_expr;
  std::vector<std::string> targets;
  std::vector<std::pair<ExprP, Body>> branches;
  std::vector<std::pair<std::string, ExprP>> params;  // macro parameters and defaults (null: none)
  Body body;
  Body else_body;
  bool recursive = false;
};

// The name filter blocks and block sets apply their filter chain to.
inline constexpr const char* kBodyName = "__body__";

// What parse and render throw inside this module (render.cc and parse.cc
// turn it into a Status at the API boundary).
struct TemplateError : std::runtime_error {
  enum class Kind { kSyntax, kRuntime, kRaised, kLimit };
  TemplateError(Kind k, int l, const std::string& msg) : std::runtime_error(msg), kind(k), line(l) {}
  Kind kind;
  int line;
};

// Parses a template (throws TemplateError kSyntax).
NodeP parse_template(std::string_view source);

}  // namespace zl::tmpl
