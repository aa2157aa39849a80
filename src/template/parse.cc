// Lexer and parser: template source -> tree (ast.h).
//
// The lexer applies Jinja2's whitespace rules as apply_chat_template
// configures them (trim_blocks and lstrip_blocks on): a newline right after
// a block or comment tag is dropped; spaces and tabs between the start of a
// line and a block or comment tag are dropped; `-` on a tag strips all
// whitespace on that side, `+` keeps it. Expression precedence follows
// Jinja2: ternary < or < and < not < comparisons (in, not in) < + - < ~ <
// * / // % < ** < unary minus < postfix (attributes, subscripts, calls)
// with filters and `is` tests.
#include <cstring>
#include <string_view>

#include "template/ast.h"

namespace zl::tmpl {
namespace {

constexpr int kMaxNesting = 200;  // expression and statement nesting (the parser's recursion)

enum class Tok { kText, kVarBegin, kVarEnd, kBlockBegin, kBlockEnd, kName, kString, kInt, kFloat, kOp, kEof };

struct Token {
  Tok type;
  std::string text;
  int line;
  int64_t int_value = 0;
  double float_value = 0;
};

[[noreturn]] void syntax_error(int line, const std::string& msg) {
  throw TemplateError(TemplateError::Kind::kSyntax, line, msg);
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

class Lexer {
 public:
  explicit Lexer(std::string_view src) : src_(src) {}

  std::vector<Token> run() {
    bool line_starting = true;
    while (pos_ < src_.size()) {
      const size_t open = find_tag(pos_);
      std::string text(src_.substr(pos_, open - pos_));
      if (open == src_.size()) {
        emit_text(std::move(text));
        break;
      }
      const char kind = src_[open + 1];  // '{', '%' or '#'
      const char sign = open + 2 < src_.size() ? src_[open + 2] : 0;
      if (sign == '-') {
        while (!text.empty() && is_space(text.back())) text.pop_back();
      } else if (sign != '+' && kind != '{') {
        const size_t nl = text.rfind('\n');
        const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
        if (l_pos > 0 || line_starting) {
          bool blank = true;
          for (size_t i = l_pos; i < text.size(); ++i) blank &= is_space(text[i]);
          if (blank) text.resize(l_pos);
        }
      }
      emit_text(std::move(text));
      count_lines(pos_, open);
      pos_ = open + 2 + ((sign == '-' || sign == '+') ? 1 : 0);
      if (kind == '#') {
        lex_comment();
      } else if (kind == '%' && is_raw_tag()) {
        lex_raw();
      } else {
        lex_tag(kind == '{');
      }
      line_starting = pos_ > 0 && src_[pos_ - 1] == '\n';
    }
    tokens_.push_back({Tok::kEof, "", line_});
    return std::move(tokens_);
  }

 private:
  size_t find_tag(size_t from) const {
    for (size_t i = from; i + 1 < src_.size(); ++i) {
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    }
    return src_.size();
  }

  void count_lines(size_t from, size_t to) {
    for (size_t i = from; i < to && i < src_.size(); ++i) line_ += src_[i] == '\n';
  }

  void emit_text(std::string text) {
    if (!text.empty()) tokens_.push_back({Tok::kText, std::move(text), line_});
  }

  // After a tag's end: `-` strips what follows, trim_blocks drops one newline.
  void after_tag_end(bool minus, bool block) {
    if (minus) {
      size_t p = pos_;
      while (p < src_.size() && is_space(src_[p])) ++p;
      count_lines(pos_, p);
      pos_ = p;
    } else if (block && pos_ < src_.size() && src_[pos_] == '\n') {
      ++pos_;
      ++line_;
    }
  }

  void lex_comment() {
    const int start = line_;
    const size_t end = src_.find("#}", pos_);
    if (end == std::string_view::npos) syntax_error(start, "unterminated comment");
    const bool minus = end > pos_ && src_[end - 1] == '-';
    const bool plus = end > pos_ && src_[end - 1] == '+';
    count_lines(pos_, end);
    pos_ = end + 2;
    after_tag_end(minus, !plus);
  }

  // `{% raw %}` (pos_ is after `{%`): is this tag the raw keyword?
  bool is_raw_tag() const {
    size_t p = pos_;
    while (p < src_.size() && is_space(src_[p])) ++p;
    if (src_.substr(p, 3) != "raw") return false;
    p += 3;
    while (p < src_.size() && is_space(src_[p])) ++p;
    if (p < src_.size() && src_[p] == '-') ++p;
    return src_.substr(p, 2) == "%}";
  }

  void lex_raw() {
    const int start = line_;
    size_t p = src_.find("%}", pos_);
    const bool minus_open = src_[p - 1] == '-';
    count_lines(pos_, p);
    pos_ = p + 2;
    after_tag_end(minus_open, true);
    // Find {%[-] endraw [-]%}.
    for (size_t i = pos_; i + 1 < src_.size(); ++i) {
      if (src_[i] != '{' || src_[i + 1] != '%') continue;
      size_t q = i + 2;
      const bool minus_before = q < src_.size() && src_[q] == '-';
      if (minus_before || (q < src_.size() && src_[q] == '+')) ++q;
      while (q < src_.size() && is_space(src_[q])) ++q;
      if (src_.substr(q, 6) != "endraw") continue;
      q += 6;
      while (q < src_.size() && is_space(src_[q])) ++q;
      const bool minus_after = q < src_.size() && src_[q] == '-';
      if (minus_after) ++q;
      if (src_.substr(q, 2) != "%}") continue;
      std::string text(src_.substr(pos_, i - pos_));
      if (minus_before) {
        while (!text.empty() && is_space(text.back())) text.pop_back();
      }
      emit_text(std::move(text));
      count_lines(pos_, q + 2);
      pos_ = q + 2;
      after_tag_end(minus_after, true);
      return;
    }
    syntax_error(start, "unterminated raw block (no endraw)");
  }

  void lex_tag(bool variable) {
    const int start = line_;
    tokens_.push_back({variable ? Tok::kVarBegin : Tok::kBlockBegin, "", line_});
    const char close = variable ? '}' : '%';
    while (true) {
      while (pos_ < src_.size() && is_space(src_[pos_])) {
        line_ += src_[pos_] == '\n';
        ++pos_;
      }
      if (pos_ >= src_.size()) syntax_error(start, variable ? "unterminated '{{'" : "unterminated '{%'");
      const char c = src_[pos_];
      // The tag's end: [-+]%} or [-]}}.
      if ((c == '-' || c == '+') && pos_ + 2 < src_.size() + 0 && src_[pos_ + 1] == close && src_[pos_ + 2] == '}') {
        pos_ += 3;
        tokens_.push_back({variable ? Tok::kVarEnd : Tok::kBlockEnd, "", line_});
        after_tag_end(c == '-', !variable && c != '+');
        return;
      }
      if (c == close && pos_ + 1 < src_.size() && src_[pos_ + 1] == '}') {
        // `}}` inside an expression closes a dict literal only if one is open.
        if (!(variable && depth_braces_ > 0)) {
          pos_ += 2;
          tokens_.push_back({variable ? Tok::kVarEnd : Tok::kBlockEnd, "", line_});
          after_tag_end(false, !variable);
          return;
        }
      }
      lex_expr_token();
    }
  }

  void lex_expr_token() {
    const char c = src_[pos_];
    if (is_name_start(c)) {
      size_t e = pos_;
      while (e < src_.size() && (is_name_start(src_[e]) || is_digit(src_[e]))) ++e;
      tokens_.push_back({Tok::kName, std::string(src_.substr(pos_, e - pos_)), line_});
      pos_ = e;
      return;
    }
    if (is_digit(c)) {
      lex_number();
      return;
    }
    if (c == '\'' || c == '"') {
      lex_string(c);
      return;
    }
    static constexpr const char* kOps[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<", ">",
                                           "(", ")", "[", "]", "{", "}", ",", ".", ":", "|", "=", "!"};
    for (const char* op : kOps) {
      const size_t n = std::strlen(op);
      if (src_.substr(pos_, n) == op) {
        if (op[0] == '{' && n == 1) ++depth_braces_;
        if (op[0] == '}' && n == 1 && depth_braces_ > 0) --depth_braces_;
        tokens_.push_back({Tok::kOp, op, line_});
        pos_ += n;
        return;
      }
    }
    syntax_error(line_, std::string("unexpected character '") + c + "'");
  }

  void lex_number() {
    size_t e = pos_;
    bool is_float = false;
    while (e < src_.size() && (is_digit(src_[e]) || src_[e] == '_')) ++e;
    if (e + 1 < src_.size() && src_[e] == '.' && is_digit(src_[e + 1])) {
      is_float = true;
      ++e;
      while (e < src_.size() && is_digit(src_[e])) ++e;
    }
    if (e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
      size_t f = e + 1;
      if (f < src_.size() && (src_[f] == '+' || src_[f] == '-')) ++f;
      if (f < src_.size() && is_digit(src_[f])) {
        is_float = true;
        e = f;
        while (e < src_.size() && is_digit(src_[e])) ++e;
      }
    }
    std::string text;
    for (size_t i = pos_; i < e; ++i) {
      if (src_[i] != '_') text += src_[i];
    }
    Token t{is_float ? Tok::kFloat : Tok::kInt, text, line_};
    if (is_float) {
      t.float_value = std::strtod(text.c_str(), nullptr);
    } else {
      errno = 0;
      t.int_value = std::strtoll(text.c_str(), nullptr, 10);
      if (errno == ERANGE) syntax_error(line_, "integer literal out of range: " + text);
    }
    tokens_.push_back(std::move(t));
    pos_ = e;
  }

  static void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  // Python string literal escapes (\n \t \r \\ \' \" \xHH \uXXXX \UXXXXXXXX);
  // an unknown escape keeps its backslash, as Python does.
  void lex_string(char quote) {
    const int start = line_;
    std::string out;
    size_t p = pos_ + 1;
    while (true) {
      if (p >= src_.size()) syntax_error(start, "unterminated string literal");
      const char c = src_[p];
      if (c == quote) break;
      if (c == '\n') ++line_;
      if (c != '\\' || p + 1 >= src_.size()) {
        out += c;
        ++p;
        continue;
      }
      const char e = src_[p + 1];
      p += 2;
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case '0': out += '\0'; break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case '\n': break;
        case 'x':
        case 'u':
        case 'U': {
          const size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          uint32_t cp = 0;
          for (size_t i = 0; i < n; ++i) {
            const char h = p + i < src_.size() ? src_[p + i] : 0;
            const int d = is_digit(h) ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10 : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
            if (d < 0) syntax_error(line_, "bad \\" + std::string(1, e) + " escape in a string literal");
            cp = cp * 16 + static_cast<uint32_t>(d);
          }
          if (cp > 0x10FFFF) syntax_error(line_, "bad code point in a string literal");
          p += n;
          append_utf8(out, cp);
          break;
        }
        default:
          out += '\\';
          out += e;
      }
    }
    tokens_.push_back({Tok::kString, std::move(out), start});
    pos_ = p + 1;
  }

  std::string_view src_;
  size_t pos_ = 0;
  int line_ = 1;
  int depth_braces_ = 0;
  std::vector<Token> tokens_;
};

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : toks_(std::move(tokens)) {}

  NodeP parse_root() {
    auto root = std::make_unique<Node>();
    root->kind = Node::Kind::kBlock;
    std::string end;
    root->body = parse_body({}, &end);
    return root;
  }

 private:
  // ---- token helpers ----
  const Token& peek(size_t k = 0) const { return toks_[std::min(pos_ + k, toks_.size() - 1)]; }
  const Token& next() {
    const Token& t = toks_[pos_];
    if (pos_ + 1 < toks_.size()) ++pos_;
    return t;
  }
  bool at_op(const char* op, size_t k = 0) const { return peek(k).type == Tok::kOp && peek(k).text == op; }
  bool at_name(const char* name, size_t k = 0) const { return peek(k).type == Tok::kName && peek(k).text == name; }
  bool accept_op(const char* op) {
    if (!at_op(op)) return false;
    next();
    return true;
  }
  bool accept_name(const char* name) {
    if (!at_name(name)) return false;
    next();
    return true;
  }
  void expect_op(const char* op) {
    if (!accept_op(op)) unexpected(std::string("expected '") + op + "'");
  }
  std::string expect_name() {
    if (peek().type != Tok::kName) unexpected("expected a name");
    return next().text;
  }
  void expect_block_end() {
    if (peek().type != Tok::kBlockEnd) unexpected("expected '%}'");
    next();
  }
  [[noreturn]] void unexpected(const std::string& what) const {
    const Token& t = peek();
    std::string got;
    switch (t.type) {
      case Tok::kEof: got = "end of template"; break;
      case Tok::kBlockEnd: got = "'%}'"; break;
      case Tok::kVarEnd: got = "'}}'"; break;
      case Tok::kText: got = "text"; break;
      default: got = "'" + t.text + "'";
    }
    syntax_error(t.line, what + ", got " + got);
  }

  struct DepthGuard {
    explicit DepthGuard(Parser* p) : p_(p) {
      if (++p_->depth_ > kMaxNesting) syntax_error(p_->peek().line, "template nested too deeply");
    }
    ~DepthGuard() { --p_->depth_; }
    Parser* p_;
  };

  // ---- statements ----
  // Parses nodes until a block tag whose keyword is in `ends` (consumed up
  // to the keyword; *end holds it) or the end of the template (ends empty).
  Body parse_body(std::initializer_list<const char*> ends, std::string* end) {
    DepthGuard guard(this);
    Body body;
    while (true) {
      const Token& t = peek();
      if (t.type == Tok::kEof) {
        if (ends.size() == 0) return body;
        syntax_error(t.line, std::string("unexpected end of template, expected '") + *ends.begin() + "'");
      }
      if (t.type == Tok::kText) {
        auto n = std::make_unique<Node>();
        n->kind = Node::Kind::kText;
        n->line = t.line;
        n->text = next().text;
        body.push_back(std::move(n));
        continue;
      }
      if (t.type == Tok::kVarBegin) {
        next();
        auto n = std::make_unique<Node>();
        n->kind = Node::Kind::kOutput;
        n->line = t.line;
        n->expr = parse_tuple_or_expr();
        if (peek().type != Tok::kVarEnd) unexpected("expected '}}'");
        next();
        body.push_back(std::move(n));
        continue;
      }
      if (t.type != Tok::kBlockBegin) unexpected("expected a tag");
      next();
      const Token& kw = peek();
      if (kw.type != Tok::kName) unexpected("expected a statement");
      for (const char* e : ends) {
        if (kw.text == e) {
          *end = next().text;
          return body;
        }
      }
      body.push_back(parse_statement());
    }
  }

  NodeP parse_statement() {
    const Token& kw = next();
    auto n = std::make_unique<Node>();
    n->line = kw.line;
    const std::string& k = kw.text;
    if (k == "if") {
      parse_if(n.get());
    } else if (k == "for") {
      parse_for(n.get());
    } else if (k == "set") {
      parse_set(n.get());
    } else if (k == "macro") {
      parse_macro(n.get());
    } else if (k == "call") {
      parse_call_block(n.get());
    } else if (k == "filter") {
      n->kind = Node::Kind::kFilterBlock;
      n->expr = parse_filter_chain_on_body();
      expect_block_end();
      std::string end;
      n->body = parse_body({"endfilter"}, &end);
      expect_block_end();
    } else if (k == "break" || k == "continue") {
      if (loop_depth_ == 0) syntax_error(kw.line, "'" + k + "' outside a loop");
      n->kind = k == "break" ? Node::Kind::kBreak : Node::Kind::kContinue;
      expect_block_end();
    } else if (k == "do") {
      n->kind = Node::Kind::kDo;
      n->expr = parse_tuple_or_expr();
      expect_block_end();
    } else if (k == "generation") {
      n->kind = Node::Kind::kBlock;
      expect_block_end();
      std::string end;
      n->body = parse_body({"endgeneration"}, &end);
      expect_block_end();
    } else if (k.starts_with("end") || k == "elif" || k == "else") {
      syntax_error(kw.line, "unexpected '" + k + "'");
    } else {
      syntax_error(kw.line, "unknown statement '" + k + "'");
    }
    return n;
  }

  void parse_if(Node* n) {
    n->kind = Node::Kind::kIf;
    ExprP cond = parse_expr();
    expect_block_end();
    while (true) {
      std::string end;
      Body body = parse_body({"elif", "else", "endif"}, &end);
      n->branches.emplace_back(std::move(cond), std::move(body));
      if (end == "endif") break;
      if (end == "elif") {
        cond = parse_expr();
        expect_block_end();
        continue;
      }
      expect_block_end();  // else
      Body else_body = parse_body({"endif"}, &end);
      n->branches.emplace_back(nullptr, std::move(else_body));
      break;
    }
    expect_block_end();
  }

  void parse_for(Node* n) {
    n->kind = Node::Kind::kFor;
    do {
      n->targets.push_back(expect_name());
    } while (accept_op(","));
    if (!accept_name("in")) unexpected("expected 'in'");
    n->expr = parse_or();  // `if` after the iterable filters, it is no ternary
    if (at_op(",")) {
      auto list = std::make_unique<Expr>();
      list->kind = Expr::Kind::kList;
      list->line = n->line;
      list->args.push_back(std::move(n->expr));
      while (accept_op(",")) list->args.push_back(parse_or());
      n->expr = std::move(list);
    }
    if (accept_name("if")) n->cond = parse_or();
    if (accept_name("recursive")) n->recursive = true;
    expect_block_end();
    ++loop_depth_;
    std::string end;
    n->body = parse_body({"else", "endfor"}, &end);
    --loop_depth_;
    if (end == "else") {
      expect_block_end();
      n->else_body = parse_body({"endfor"}, &end);
    }
    expect_block_end();
  }

  void parse_set(Node* n) {
    const std::string first = expect_name();
    if (accept_op(".")) {
      n->kind = Node::Kind::kSet;
      auto target = std::make_unique<Expr>();
      target->kind = Expr::Kind::kGetAttr;
      target->line = n->line;
      target->name = expect_name();
      auto obj = std::make_unique<Expr>();
      obj->kind = Expr::Kind::kName;
      obj->name = first;
      target->args.push_back(std::move(obj));
      n->target_expr = std::move(target);
      expect_op("=");
      n->expr = parse_tuple_or_expr();
      expect_block_end();
      return;
    }
    n->targets.push_back(first);
    while (accept_op(",")) n->targets.push_back(expect_name());
    if (accept_op("=")) {
      n->kind = Node::Kind::kSet;
      n->expr = parse_tuple_or_expr();
      expect_block_end();
      return;
    }
    if (n->targets.size() != 1) unexpected("expected '='");
    n->kind = Node::Kind::kSetBlock;
    if (at_op("|")) n->expr = parse_filter_chain_on_body();
    expect_block_end();
    std::string end;
    n->body = parse_body({"endset"}, &end);
    expect_block_end();
  }

  void parse_params(Node* n) {
    expect_op("(");
    while (!accept_op(")")) {
      if (!n->params.empty()) expect_op(",");
      if (accept_op(")")) break;
      std::string name = expect_name();
      ExprP def;
      if (accept_op("=")) def = parse_expr();
      n->params.emplace_back(std::move(name), std::move(def));
    }
  }

  void parse_macro(Node* n) {
    n->kind = Node::Kind::kMacro;
    n->name = expect_name();
    parse_params(n);
    expect_block_end();
    std::string end;
    const int saved = loop_depth_;
    loop_depth_ = 0;
    n->body = parse_body({"endmacro"}, &end);
    loop_depth_ = saved;
    if (peek().type == Tok::kName) next();  // {% endmacro name %}
    expect_block_end();
  }

  void parse_call_block(Node* n) {
    n->kind = Node::Kind::kCallBlock;
    if (at_op("(")) parse_params(n);
    n->expr = parse_expr();
    if (n->expr->kind != Expr::Kind::kCall) syntax_error(n->line, "expected a macro call after 'call'");
    expect_block_end();
    std::string end;
    n->body = parse_body({"endcall"}, &end);
    expect_block_end();
  }

  // `name(args) | name2 …` as filters applied to kBodyName.
  ExprP parse_filter_chain_on_body() {
    auto e = std::make_unique<Expr>();
    e->kind = Expr::Kind::kName;
    e->name = kBodyName;
    e->line = peek().line;
    accept_op("|");
    e = parse_filter(std::move(e));
    while (accept_op("|")) e = parse_filter(std::move(e));
    return e;
  }

  // ---- expressions ----
  static ExprP make(Expr::Kind kind, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    return e;
  }
  static ExprP binary(std::string op, ExprP a, ExprP b, int line) {
    auto e = make(Expr::Kind::kBinary, line);
    e->name = std::move(op);
    e->args.push_back(std::move(a));
    e->args.push_back(std::move(b));
    return e;
  }

  // `a, b` at the top of an output or a set is a tuple (a list here).
  ExprP parse_tuple_or_expr() {
    const int line = peek().line;
    ExprP first = parse_expr();
    if (!at_op(",")) return first;
    auto list = make(Expr::Kind::kList, line);
    list->args.push_back(std::move(first));
    while (accept_op(",")) {
      if (peek().type == Tok::kBlockEnd || peek().type == Tok::kVarEnd) break;
      list->args.push_back(parse_expr());
    }
    return list;
  }

  ExprP parse_expr() {
    DepthGuard guard(this);
    const int line = peek().line;
    ExprP e = parse_or();
    while (at_name("if")) {
      next();
      auto t = make(Expr::Kind::kTernary, line);
      ExprP cond = parse_or();
      ExprP other;
      if (accept_name("else")) other = parse_expr();
      t->args.push_back(std::move(e));
      t->args.push_back(std::move(cond));
      t->args.push_back(std::move(other));
      e = std::move(t);
    }
    return e;
  }

  ExprP parse_or() {
    ExprP e = parse_and();
    while (at_name("or")) {
      const int line = next().line;
      e = binary("or", std::move(e), parse_and(), line);
    }
    return e;
  }

  ExprP parse_and() {
    ExprP e = parse_not();
    while (at_name("and")) {
      const int line = next().line;
      e = binary("and", std::move(e), parse_not(), line);
    }
    return e;
  }

  ExprP parse_not() {
    if (at_name("not")) {
      DepthGuard guard(this);
      const int line = next().line;
      auto e = make(Expr::Kind::kUnary, line);
      e->name = "not";
      e->args.push_back(parse_not());
      return e;
    }
    return parse_compare();
  }

  ExprP parse_compare() {
    ExprP e = parse_math1();
    while (true) {
      const Token& t = peek();
      std::string op;
      if (t.type == Tok::kOp && (t.text == "==" || t.text == "!=" || t.text == "<" || t.text == ">" ||
                                 t.text == "<=" || t.text == ">=")) {
        op = t.text;
        next();
      } else if (at_name("in")) {
        op = "in";
        next();
      } else if (at_name("not") && at_name("in", 1)) {
        op = "not in";
        next();
        next();
      } else {
        return e;
      }
      e = binary(op, std::move(e), parse_math1(), t.line);
    }
  }

  ExprP parse_math1() {
    ExprP e = parse_concat();
    while (at_op("+") || at_op("-")) {
      const Token& t = next();
      e = binary(t.text, std::move(e), parse_concat(), t.line);
    }
    return e;
  }

  ExprP parse_concat() {
    ExprP e = parse_math2();
    while (at_op("~")) {
      const int line = next().line;
      e = binary("~", std::move(e), parse_math2(), line);
    }
    return e;
  }

  ExprP parse_math2() {
    ExprP e = parse_pow();
    while (at_op("*") || at_op("/") || at_op("//") || at_op("%")) {
      const Token& t = next();
      e = binary(t.text, std::move(e), parse_pow(), t.line);
    }
    return e;
  }

  ExprP parse_pow() {
    ExprP e = parse_unary(true);
    while (at_op("**")) {
      const int line = next().line;
      e = binary("**", std::move(e), parse_unary(true), line);
    }
    return e;
  }

  ExprP parse_unary(bool with_filter) {
    DepthGuard guard(this);
    ExprP e;
    if (at_op("-") || at_op("+")) {
      const Token& t = next();
      e = make(Expr::Kind::kUnary, t.line);
      e->name = t.text;
      e->args.push_back(parse_unary(false));
    } else {
      e = parse_postfix(parse_primary());
    }
    if (with_filter) e = parse_filter_expr(std::move(e));
    return e;
  }

  ExprP parse_primary() {
    DepthGuard guard(this);
    const Token& t = peek();
    switch (t.type) {
      case Tok::kName: {
        next();
        auto e = make(Expr::Kind::kLiteral, t.line);
        if (t.text == "true" || t.text == "True") {
          e->value = Value(true);
        } else if (t.text == "false" || t.text == "False") {
          e->value = Value(false);
        } else if (t.text == "none" || t.text == "None") {
          e->value = Value::none();
        } else {
          e->kind = Expr::Kind::kName;
          e->name = t.text;
        }
        return e;
      }
      case Tok::kString: {
        std::string s = next().text;
        while (peek().type == Tok::kString) s += next().text;  // adjacent literals
        auto e = make(Expr::Kind::kLiteral, t.line);
        e->value = Value(std::move(s));
        return e;
      }
      case Tok::kInt: {
        auto e = make(Expr::Kind::kLiteral, t.line);
        e->value = Value(next().int_value);
        return e;
      }
      case Tok::kFloat: {
        auto e = make(Expr::Kind::kLiteral, t.line);
        e->value = Value(next().float_value);
        return e;
      }
      case Tok::kOp:
        if (t.text == "(") return parse_paren();
        if (t.text == "[") return parse_list();
        if (t.text == "{") return parse_dict();
        break;
      default: break;
    }
    unexpected("expected an expression");
  }

  ExprP parse_paren() {
    const int line = next().line;
    if (accept_op(")")) return make(Expr::Kind::kList, line);  // ()
    ExprP first = parse_expr();
    if (accept_op(")")) return first;
    auto list = make(Expr::Kind::kList, line);
    list->args.push_back(std::move(first));
    while (accept_op(",")) {
      if (at_op(")")) break;
      list->args.push_back(parse_expr());
    }
    expect_op(")");
    return list;
  }

  ExprP parse_list() {
    auto e = make(Expr::Kind::kList, next().line);
    while (!accept_op("]")) {
      if (!e->args.empty()) expect_op(",");
      if (accept_op("]")) break;
      e->args.push_back(parse_expr());
    }
    return e;
  }

  ExprP parse_dict() {
    auto e = make(Expr::Kind::kDict, next().line);
    while (!accept_op("}")) {
      if (!e->args.empty()) expect_op(",");
      if (accept_op("}")) break;
      e->args.push_back(parse_expr());
      expect_op(":");
      e->args.push_back(parse_expr());
    }
    return e;
  }

  ExprP parse_postfix(ExprP e) {
    while (true) {
      if (at_op(".")) {
        const int line = next().line;
        auto a = make(Expr::Kind::kGetAttr, line);
        if (peek().type == Tok::kInt) {
          a->kind = Expr::Kind::kGetItem;
          a->args.push_back(std::move(e));
          auto idx = make(Expr::Kind::kLiteral, line);
          idx->value = Value(next().int_value);
          a->args.push_back(std::move(idx));
        } else {
          a->name = expect_name();
          a->args.push_back(std::move(e));
        }
        e = std::move(a);
      } else if (at_op("[")) {
        e = parse_subscript(std::move(e));
      } else if (at_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }

  ExprP parse_subscript(ExprP obj) {
    DepthGuard guard(this);
    const int line = next().line;
    ExprP parts[3];
    int n = 0;
    bool slice = false;
    while (true) {
      if (!at_op(":") && !at_op("]")) parts[n] = parse_expr();
      if (accept_op(":")) {
        slice = true;
        if (++n > 2) unexpected("expected ']'");
        continue;
      }
      break;
    }
    expect_op("]");
    if (!slice) {
      if (!parts[0]) syntax_error(line, "empty subscript");
      auto e = make(Expr::Kind::kGetItem, line);
      e->args.push_back(std::move(obj));
      e->args.push_back(std::move(parts[0]));
      return e;
    }
    auto e = make(Expr::Kind::kSlice, line);
    e->args.push_back(std::move(obj));
    for (auto& p : parts) e->args.push_back(std::move(p));
    return e;
  }

  void parse_args(Expr* call) {
    expect_op("(");
    bool first = true;
    while (!accept_op(")")) {
      if (!first) expect_op(",");
      first = false;
      if (accept_op(")")) break;
      if (peek().type == Tok::kName && at_op("=", 1)) {
        std::string name = next().text;
        next();
        call->kwargs.emplace_back(std::move(name), parse_expr());
      } else {
        if (!call->kwargs.empty()) unexpected("positional argument after keyword argument");
        call->args.push_back(parse_expr());
      }
    }
  }

  ExprP parse_call(ExprP callee) {
    DepthGuard guard(this);
    auto e = make(Expr::Kind::kCall, peek().line);
    e->args.push_back(std::move(callee));
    parse_args(e.get());
    return e;
  }

  ExprP parse_filter(ExprP input) {
    DepthGuard guard(this);
    auto f = make(Expr::Kind::kFilter, peek().line);
    f->name = expect_name();
    while (accept_op(".")) f->name += "." + expect_name();
    f->args.push_back(std::move(input));
    if (at_op("(")) parse_args(f.get());
    return f;
  }

  // Starts an argument of a test written without parentheses (`is divisibleby 3`).
  bool at_test_argument() const {
    const Token& t = peek();
    if (t.type == Tok::kString || t.type == Tok::kInt || t.type == Tok::kFloat) return true;
    if (t.type == Tok::kOp) return t.text == "[" || t.text == "{" || t.text == "-";
    if (t.type != Tok::kName) return false;
    static constexpr const char* kStop[] = {"else", "or", "and", "if", "in", "is", "not", "recursive"};
    for (const char* s : kStop) {
      if (t.text == s) return false;
    }
    return true;
  }

  ExprP parse_filter_expr(ExprP e) {
    while (true) {
      if (at_op("|")) {
        next();
        e = parse_filter(std::move(e));
      } else if (at_name("is")) {
        DepthGuard guard(this);
        auto t = make(Expr::Kind::kTest, next().line);
        t->negated = accept_name("not");
        t->name = expect_name();
        t->args.push_back(std::move(e));
        if (at_op("(")) {
          parse_args(t.get());
        } else if (at_test_argument()) {
          t->args.push_back(parse_postfix(parse_primary()));
        }
        e = std::move(t);
      } else if (at_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }

  std::vector<Token> toks_;
  size_t pos_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

NodeP parse_template(std::string_view source) {
  Lexer lexer(source);
  Parser parser(lexer.run());
  return parser.parse_root();
}

}  // namespace zl::tmpl
