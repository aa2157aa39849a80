// The evaluator: walks a parsed template (ast.h) with a context and writes
// the output as parts (markup / request input, template/jinja.h).
//
// Scopes follow Jinja2: a for-loop iteration and a macro call each open a
// scope (a `set` inside them is not seen outside; namespaces are how
// templates carry state out); if-blocks do not. Macros see the template's
// globals (the context, builtins and top-level sets), their arguments and
// `caller`. Every loop iteration, macro call and output write is counted
// against RenderLimits.
#include <chrono>
#include <ctime>
#include <unordered_map>

#include "template/ast.h"
#include "template/builtins.h"
#include "template/jinja.h"

namespace zl::tmpl {

struct Callable {
  const Node* node = nullptr;  // a macro, or a call block (the caller)
  std::string builtin;         // a global function: "range", "namespace", …
};

namespace {

struct Scope {
  Scope* parent = nullptr;
  std::unordered_map<std::string, Value> vars;

  const Value* find(const std::string& name) const {
    for (const Scope* s = this; s; s = s->parent) {
      auto it = s->vars.find(name);
      if (it != s->vars.end()) return &it->second;
    }
    return nullptr;
  }
};

enum class Flow { kNormal, kBreak, kContinue };

using Parts = std::vector<Rendered::Part>;

class Renderer {
 public:
  Renderer(const RenderLimits& limits, Scope* globals)
      : limits_(limits), globals_(globals), deadline_(std::chrono::steady_clock::now() + limits.max_time) {}

  void render_root(const Node& root, Parts* out) {
    outputs_.push_back(out);
    render_body(root.body, *globals_);
  }

 private:
  [[noreturn]] static void limit_error(const std::string& msg) {
    throw TemplateError(TemplateError::Kind::kLimit, 0, msg);
  }

  void tick() {
    if ((++ticks_ & 255) == 0 && std::chrono::steady_clock::now() > deadline_) {
      limit_error("rendering took longer than " + std::to_string(limits_.max_time.count()) + " ms");
    }
  }

  void emit(std::string_view text, bool from_input) {
    if (text.empty()) return;
    bytes_ += text.size();
    if (bytes_ > limits_.max_output_bytes) {
      limit_error("the output is larger than " + std::to_string(limits_.max_output_bytes) + " bytes");
    }
    Parts& out = *outputs_.back();
    if (!out.empty() && out.back().from_input == from_input) {
      out.back().text += text;
    } else {
      out.push_back({std::string(text), from_input});
    }
  }

  // Renders `body` into a string value (input only if every part was).
  Value capture(const Body& body, Scope& scope) {
    Parts parts;
    outputs_.push_back(&parts);
    struct Pop {
      std::vector<Parts*>* v;
      ~Pop() { v->pop_back(); }
    } pop{&outputs_};
    render_body(body, scope);
    std::string text;
    bool all_input = !parts.empty();
    for (const auto& p : parts) {
      text += p.text;
      all_input &= p.from_input;
    }
    return Value(std::move(text), all_input);
  }

  Flow render_body(const Body& body, Scope& scope) {
    for (const NodeP& n : body) {
      const Flow f = render_node(*n, scope);
      if (f != Flow::kNormal) return f;
    }
    return Flow::kNormal;
  }

  Flow render_node(const Node& n, Scope& scope) {
    tick();
    switch (n.kind) {
      case Node::Kind::kText: emit(n.text, false); return Flow::kNormal;
      case Node::Kind::kOutput: {
        const Value v = eval(*n.expr, scope);
        if (v.is_string()) {
          emit(v.str(), v.from_input());
        } else {
          emit(v.to_str(), false);
        }
        return Flow::kNormal;
      }
      case Node::Kind::kIf:
        for (const auto& [cond, body] : n.branches) {
          if (!cond || eval(*cond, scope).truthy()) return render_body(body, scope);
        }
        return Flow::kNormal;
      case Node::Kind::kFor: render_for(n, scope); return Flow::kNormal;
      case Node::Kind::kSet: render_set(n, scope); return Flow::kNormal;
      case Node::Kind::kSetBlock: {
        Value v = capture(n.body, scope);
        if (n.expr) v = apply_body_filters(*n.expr, std::move(v), scope);
        scope.vars[n.targets[0]] = std::move(v);
        return Flow::kNormal;
      }
      case Node::Kind::kMacro: {
        auto c = std::make_shared<Callable>();
        c->node = &n;
        scope.vars[n.name] = Value(std::shared_ptr<const Callable>(std::move(c)));
        return Flow::kNormal;
      }
      case Node::Kind::kCallBlock: {
        auto c = std::make_shared<Callable>();
        c->node = &n;
        const Value v = eval_call(*n.expr, scope, Value(std::shared_ptr<const Callable>(std::move(c))));
        emit(v.is_string() ? v.str() : v.to_str(), v.is_string() && v.from_input());
        return Flow::kNormal;
      }
      case Node::Kind::kFilterBlock: {
        const Value v = apply_body_filters(*n.expr, capture(n.body, scope), scope);
        emit(v.is_string() ? v.str() : v.to_str(), v.is_string() && v.from_input());
        return Flow::kNormal;
      }
      case Node::Kind::kBreak: return Flow::kBreak;
      case Node::Kind::kContinue: return Flow::kContinue;
      case Node::Kind::kDo: eval(*n.expr, scope); return Flow::kNormal;
      case Node::Kind::kBlock: return render_body(n.body, scope);
    }
    return Flow::kNormal;
  }

  Value apply_body_filters(const Expr& filters, Value body, Scope& scope) {
    Scope inner{&scope, {}};
    inner.vars[kBodyName] = std::move(body);
    return eval(filters, inner);
  }

  static void bind(Scope& scope, const std::vector<std::string>& targets, const Value& v, int line) {
    if (targets.size() == 1) {
      scope.vars[targets[0]] = v;
      return;
    }
    if (!v.is_list() || v.list().size() != targets.size()) {
      runtime_error(line, "cannot unpack " + v.type_name() + " into " + std::to_string(targets.size()) + " names");
    }
    for (size_t i = 0; i < targets.size(); ++i) scope.vars[targets[i]] = v.list()[i];
  }

  void render_set(const Node& n, Scope& scope) {
    Value v = eval(*n.expr, scope);
    if (!n.target_expr) {
      bind(scope, n.targets, v, n.line);
      return;
    }
    const Value ns = eval(*n.target_expr->args[0], scope);
    if (!ns.is_namespace()) runtime_error(n.line, "cannot assign an attribute to a non-namespace object");
    if (v.holds_namespace()) runtime_error(n.line, "a namespace attribute cannot hold a namespace");
    ns.dict().set(n.target_expr->name, std::move(v));
  }

  void count_iteration() {
    if (++iterations_ > limits_.max_loop_iterations) {
      limit_error("more than " + std::to_string(limits_.max_loop_iterations) + " loop iterations");
    }
    tick();
  }

  void render_for(const Node& n, Scope& scope) {
    if (n.recursive) runtime_error(n.line, "recursive loops are not supported");
    const Value seq = eval(*n.expr, scope);
    List items = iterate(seq, n.line);
    if (n.cond) {
      List kept;
      for (const Value& item : items) {
        count_iteration();
        Scope probe{&scope, {}};
        bind(probe, n.targets, item, n.line);
        if (eval(*n.cond, probe).truthy()) kept.push_back(item);
      }
      items = std::move(kept);
    }
    if (items.empty()) {
      render_body(n.else_body, scope);
      return;
    }
    const int64_t len = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < len; ++i) {
      count_iteration();
      Scope iter{&scope, {}};
      bind(iter, n.targets, items[static_cast<size_t>(i)], n.line);
      Dict loop;
      loop.items.reserve(12);
      loop.items.emplace_back("index", Value(i + 1));
      loop.items.emplace_back("index0", Value(i));
      loop.items.emplace_back("revindex", Value(len - i));
      loop.items.emplace_back("revindex0", Value(len - i - 1));
      loop.items.emplace_back("first", Value(i == 0));
      loop.items.emplace_back("last", Value(i == len - 1));
      loop.items.emplace_back("length", Value(len));
      loop.items.emplace_back("depth", Value(1));
      loop.items.emplace_back("depth0", Value(0));
      loop.items.emplace_back("previtem", i > 0 ? items[static_cast<size_t>(i - 1)] : Value());
      loop.items.emplace_back("nextitem", i + 1 < len ? items[static_cast<size_t>(i + 1)] : Value());
      iter.vars["loop"] = Value(std::move(loop));
      if (render_body(n.body, iter) == Flow::kBreak) break;
    }
  }

  // ---- expressions ----
  Value eval(const Expr& e, Scope& scope) {
    switch (e.kind) {
      case Expr::Kind::kLiteral: return e.value;
      case Expr::Kind::kName: {
        const Value* v = scope.find(e.name);
        return v ? *v : Value();
      }
      case Expr::Kind::kList: {
        List l;
        l.reserve(e.args.size());
        for (const ExprP& a : e.args) l.push_back(eval(*a, scope));
        return Value(std::move(l));
      }
      case Expr::Kind::kDict: {
        Dict d;
        for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
          const Value k = eval(*e.args[i], scope);
          d.set(k.is_string() ? k.str() : k.to_str(), eval(*e.args[i + 1], scope));
        }
        return Value(std::move(d));
      }
      case Expr::Kind::kUnary: return eval_unary(e, scope);
      case Expr::Kind::kBinary: return eval_binary(e, scope);
      case Expr::Kind::kTernary:
        if (eval(*e.args[1], scope).truthy()) return eval(*e.args[0], scope);
        return e.args[2] ? eval(*e.args[2], scope) : Value();
      case Expr::Kind::kGetAttr: return get_item(eval(*e.args[0], scope), Value(e.name));
      case Expr::Kind::kGetItem: return get_item(eval(*e.args[0], scope), eval(*e.args[1], scope));
      case Expr::Kind::kSlice: {
        auto opt = [&](size_t i) { return e.args[i] ? eval(*e.args[i], scope) : Value(); };
        return slice(eval(*e.args[0], scope), opt(1), opt(2), opt(3), e.line);
      }
      case Expr::Kind::kCall: return eval_call(e, scope, Value());
      case Expr::Kind::kFilter: {
        const Value input = eval(*e.args[0], scope);
        return apply_filter(e.name, input, eval_args(e, scope), e.line);
      }
      case Expr::Kind::kTest: {
        const Value input = eval(*e.args[0], scope);
        return Value(apply_test(e.name, input, eval_args(e, scope), e.line) != e.negated);
      }
    }
    return {};
  }

  CallArgs eval_args(const Expr& e, Scope& scope) {
    CallArgs a;
    a.args.reserve(e.args.size());
    for (size_t i = 1; i < e.args.size(); ++i) a.args.push_back(eval(*e.args[i], scope));
    for (const auto& [k, v] : e.kwargs) a.kwargs.emplace_back(k, eval(*v, scope));
    return a;
  }

  Value eval_unary(const Expr& e, Scope& scope) {
    const Value v = eval(*e.args[0], scope);
    if (e.name == "not") return Value(!v.truthy());
    if (v.is_float()) return Value(e.name == "-" ? -v.as_number() : v.as_number());
    if (v.is_int() || v.is_bool()) {
      if (e.name == "-" && v.as_int() == INT64_MIN) runtime_error(e.line, "integer overflow");
      return Value(e.name == "-" ? -v.as_int() : v.as_int());
    }
    runtime_error(e.line, "bad operand type for unary " + e.name + ": '" + v.type_name() + "'");
  }

  Value eval_binary(const Expr& e, Scope& scope) {
    const std::string& op = e.name;
    const Value a = eval(*e.args[0], scope);
    if (op == "and") return a.truthy() ? eval(*e.args[1], scope) : a;
    if (op == "or") return a.truthy() ? a : eval(*e.args[1], scope);
    const Value b = eval(*e.args[1], scope);
    if (op == "~") {
      const bool in = a.is_string() && a.from_input() && b.is_string() && b.from_input();
      return Value(a.to_str() + b.to_str(), in);
    }
    if (op == "==") return Value(equal(a, b));
    if (op == "!=") return Value(!equal(a, b));
    if (op == "in") return Value(contains(b, a, e.line));
    if (op == "not in") return Value(!contains(b, a, e.line));
    if (op == "<" || op == ">" || op == "<=" || op == ">=") {
      bool comparable = true;
      const bool lt = less(a, b, &comparable);
      const bool gt = comparable && less(b, a, &comparable);
      if (!comparable) {
        runtime_error(e.line, "'" + op + "' not supported between '" + a.type_name() + "' and '" + b.type_name() + "'");
      }
      if (op == "<") return Value(lt);
      if (op == ">") return Value(gt);
      if (op == "<=") return Value(!gt);
      return Value(!lt);
    }
    return arithmetic(op, a, b, e.line);
  }

  // A call; `caller` is set for the call of a {% call %} block.
  Value eval_call(const Expr& e, Scope& scope, const Value& caller) {
    const Expr& callee = *e.args[0];
    if (callee.kind == Expr::Kind::kGetAttr) {
      const Value obj = eval(*callee.args[0], scope);
      CallArgs args = eval_args(e, scope);
      Value out;
      if (call_method(obj, callee.name, args, e.line, &out)) return out;
      if (callee.name == "cycle" && obj.is_dict() && obj.dict().find("index0") && !args.args.empty()) {
        const int64_t i = obj.dict().find("index0")->as_int();
        return args.args[static_cast<size_t>(i % static_cast<int64_t>(args.args.size()))];
      }
      const Value f = get_item(obj, Value(callee.name));
      if (!f.is_callable()) runtime_error(e.line, "'" + obj.type_name() + "' object has no method '" + callee.name + "'");
      return invoke(f.callable(), args, caller, e.line);
    }
    const Value f = eval(callee, scope);
    if (!f.is_callable()) {
      const std::string what = callee.kind == Expr::Kind::kName ? "'" + callee.name + "'" : "the value";
      runtime_error(e.line, what + (f.is_undefined() ? " is undefined" : " is not callable"));
    }
    return invoke(f.callable(), eval_args(e, scope), caller, e.line);
  }

  Value invoke(const Callable& c, const CallArgs& args, const Value& caller, int line) {
    if (!c.node) return call_builtin(c.builtin, args, line);
    if (++call_depth_ > limits_.max_call_depth) {
      limit_error("macro calls nested deeper than " + std::to_string(limits_.max_call_depth));
    }
    struct Depth {
      int* d;
      ~Depth() { --*d; }
    } depth{&call_depth_};
    const Node& m = *c.node;
    Scope scope{globals_, {}};
    for (size_t i = 0; i < m.params.size(); ++i) {
      const auto& [name, def] = m.params[i];
      const Value* v = args.get(i, name);
      scope.vars[name] = v ? *v : def ? eval(*def, scope) : Value();
    }
    List varargs;
    for (size_t i = m.params.size(); i < args.args.size(); ++i) varargs.push_back(args.args[i]);
    scope.vars["varargs"] = Value(std::move(varargs));
    if (!caller.is_undefined()) scope.vars["caller"] = caller;
    return capture(m.body, scope);
  }

  Value call_builtin(const std::string& name, const CallArgs& a, int line) {
    if (name == "raise_exception") {
      const Value* msg = a.get(0, "message");
      throw TemplateError(TemplateError::Kind::kRaised, line, msg ? msg->to_str() : "raise_exception called");
    }
    if (name == "strftime_now") {
      const Value* fmt = a.get(0, "format");
      if (!fmt || !fmt->is_string()) runtime_error(line, "strftime_now expects a format string");
      const std::time_t now = std::time(nullptr);
      std::tm tm{};
      localtime_r(&now, &tm);
      char buf[256];
      const size_t n = std::strftime(buf, sizeof buf, fmt->str().c_str(), &tm);
      return Value(std::string(buf, n));
    }
    if (name == "range") {
      int64_t start = 0, stop = 0, step = 1;
      for (const Value& v : a.args) {
        if (!v.is_int()) runtime_error(line, "range expects integers");
      }
      if (a.args.size() == 1) {
        stop = a.args[0].as_int();
      } else if (a.args.size() >= 2) {
        start = a.args[0].as_int();
        stop = a.args[1].as_int();
        if (a.args.size() >= 3) step = a.args[2].as_int();
      }
      if (step == 0) runtime_error(line, "range step cannot be zero");
      List out;
      for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
        count_iteration();
        out.push_back(Value(i));
      }
      return Value(std::move(out));
    }
    if (name == "namespace" || name == "dict") {
      Dict d;
      if (!a.args.empty() && a.args[0].is_dict()) d = a.args[0].dict();
      for (const auto& [k, v] : a.kwargs) d.set(k, v);
      return Value(std::move(d), name == "namespace");
    }
    runtime_error(line, "unknown function '" + name + "'");
  }

  const RenderLimits& limits_;
  Scope* globals_;
  std::chrono::steady_clock::time_point deadline_;
  std::vector<Parts*> outputs_;
  size_t bytes_ = 0;
  int64_t iterations_ = 0;
  uint64_t ticks_ = 0;
  int call_depth_ = 0;
};

Status to_status(const TemplateError& e, std::string_view name) {
  const ErrorDetail detail{.reason = ErrorReason::kInvalidPrompt};
  if (e.kind == TemplateError::Kind::kRaised) return invalid_argument(e.what(), detail);
  std::string msg = std::string(name);
  if (e.line > 0) msg += " line " + std::to_string(e.line);
  return invalid_argument(msg + ": " + e.what(), detail);
}

}  // namespace

std::string Rendered::text() const {
  std::string out;
  for (const Part& p : parts) out += p.text;
  return out;
}

Result<Template> Template::parse(std::string_view source, std::string name) {
  Template t;
  t.source_ = std::make_shared<const std::string>(source);
  t.name_ = std::move(name);
  try {
    t.root_ = parse_template(*t.source_);
  } catch (const TemplateError& e) {
    return invalid_argument("template " + t.name_ + " line " + std::to_string(e.line) + ": " + e.what());
  }
  return t;
}

Result<Rendered> Template::render(const Value& context, const RenderLimits& limits) const {
  Scope globals;
  for (const char* f : {"raise_exception", "strftime_now", "range", "namespace", "dict"}) {
    auto c = std::make_shared<Callable>();
    c->builtin = f;
    globals.vars[f] = Value(std::shared_ptr<const Callable>(std::move(c)));
  }
  if (context.is_dict()) {
    for (const auto& [k, v] : context.dict().items) globals.vars[k] = v;
  }
  Rendered out;
  try {
    Renderer r(limits, &globals);
    r.render_root(*root_, &out.parts);
  } catch (const TemplateError& e) {
    return to_status(e, name_);
  } catch (const std::exception& e) {  // a value nested too deep (value.h), memory
    return to_status(TemplateError(TemplateError::Kind::kLimit, 0, e.what()), name_);
  }
  return out;
}

}  // namespace zl::tmpl
