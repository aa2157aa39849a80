#include "limits/redis_store.h"

#include <hiredis/hiredis.h>
#include <sys/time.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

namespace zl::limits {
namespace {

// LocalBucketStore::take, step for step (bucket_store.cc), on Redis's clock.
// KEYS[i]: op i's hash; ARGV[3i-2..3i]: its limit, need ('-inf' allowed),
// amount. Buckets are cached by key in `level`/`last`, so an op that repeats
// a key sees what the ops before it did, as in the local store. Replies
// {admitted (1/0), level_1 .. level_n} with levels as %.17g strings. Every
// touched bucket is written back (a refused take still refills to now) and
// expires when it would be full again (PEXPIRE; a full bucket and a missing
// one are the same, a caveat aside: after a limit is raised, a missing
// bucket is full at the new limit where a kept one would refill towards it).
constexpr const char* kTakeScript = R"lua(
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local function num(s)
  if s == '-inf' then return -math.huge end
  return tonumber(s)
end
local level, last, ttl = {}, {}, {}
local admitted = true
for i = 1, #KEYS do
  local k = KEYS[i]
  local limit, need = tonumber(ARGV[3 * i - 2]), num(ARGV[3 * i - 1])
  if level[k] == nil then
    local h = redis.call('HMGET', k, 'l', 't')
    if h[1] and h[2] then
      level[k], last[k] = tonumber(h[1]), tonumber(h[2])
    else
      level[k], last[k] = limit, now
    end
  end
  level[k] = math.min(limit, level[k] + math.max(0, now - last[k]) * (limit / 60))
  last[k] = math.max(last[k], now)
  if level[k] < need then admitted = false end
end
local out = {admitted and 1 or 0}
for i = 1, #KEYS do
  local k = KEYS[i]
  local limit = tonumber(ARGV[3 * i - 2])
  if admitted then level[k] = level[k] - tonumber(ARGV[3 * i]) end
  out[i + 1] = string.format('%.17g', level[k])
  local ms = math.ceil((limit - level[k]) / (limit / 60) * 1000) + 1
  if ttl[k] == nil or ms > ttl[k] then ttl[k] = ms end
end
for k, ms in pairs(ttl) do
  redis.call('HSET', k, 'l', string.format('%.17g', level[k]), 't', string.format('%.17g', last[k]))
  redis.call('PEXPIRE', k, string.format('%.0f', math.min(math.max(1, ms), 1e15)))  -- an integer, never 1e+15
end
return out
)lua";

timeval to_timeval(std::chrono::milliseconds ms) {
  return timeval{.tv_sec = static_cast<time_t>(ms.count() / 1000),
                 .tv_usec = static_cast<suseconds_t>((ms.count() % 1000) * 1000)};
}

std::string format_number(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);  // "-inf" for -infinity (the script reads it)
  return buf;
}

bool timed_out(int err) { return err == EAGAIN || err == EWOULDBLOCK || err == ETIMEDOUT || err == EINPROGRESS; }

// Why a context failed; `saved_errno` was read right after the failing call
// (hiredis 0.14 reports a timeout as REDIS_ERR_IO with errno EAGAIN).
BackendFailure classify(const redisContext* c, int saved_errno, bool connecting) {
  if (c->err == REDIS_ERR_IO && timed_out(saved_errno)) return BackendFailure::kTimeout;
  if (connecting) return BackendFailure::kConnect;
  if (c->err == REDIS_ERR_PROTOCOL) return BackendFailure::kReply;
  return BackendFailure::kIo;
}

struct ReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

// One command; null on a connection failure (then *failure and *error say why).
Reply command(redisContext* c, const std::vector<std::string>& args, bool connecting, BackendFailure* failure,
              std::string* error) {
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  argv.reserve(args.size());
  lens.reserve(args.size());
  for (const std::string& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  errno = 0;
  Reply r(static_cast<redisReply*>(redisCommandArgv(c, static_cast<int>(args.size()), argv.data(), lens.data())));
  const int saved_errno = errno;
  if (!r) {
    *failure = classify(c, saved_errno, connecting);
    *error = c->errstr[0] ? c->errstr : "no reply";
    if (*failure == BackendFailure::kTimeout) *error += " (timeout)";
  }
  return r;
}

// SCRIPT LOAD; the SHA, or "" with *failure/*error set.
std::string load_script(redisContext* c, bool connecting, BackendFailure* failure, std::string* error) {
  Reply r = command(c, {"SCRIPT", "LOAD", kTakeScript}, connecting, failure, error);
  if (!r) return "";
  if (r->type != REDIS_REPLY_STRING || r->len == 0) {
    *failure = BackendFailure::kReply;
    *error = "SCRIPT LOAD: " + (r->type == REDIS_REPLY_ERROR ? std::string(r->str, r->len) : "unexpected reply");
    return "";
  }
  return std::string(r->str, r->len);
}

bool parse_double(const redisReply* r, double* out) {
  if (r->type != REDIS_REPLY_STRING) return false;
  std::string s(r->str, r->len);
  char* end = nullptr;
  *out = std::strtod(s.c_str(), &end);
  return !s.empty() && *end == '\0';
}

Status bad_op(const BucketOp& op) {
  if (!(op.limit_per_minute > 0) || !std::isfinite(op.limit_per_minute)) {
    return invalid_argument("bucket '" + op.key + "': the limit must be positive");
  }
  if (std::isnan(op.need) || op.need == std::numeric_limits<double>::infinity() || !std::isfinite(op.amount)) {
    return invalid_argument("bucket '" + op.key + "': need and amount must be numbers (need may be -inf)");
  }
  return Status::ok_status();
}

// {admitted, level_1 .. level_n} -> TakeResult, with the bucket states
// computed as LocalBucketStore::take computes them.
Result<TakeResult> parse_take_reply(const redisReply* r, std::span<const BucketOp> ops, BackendFailure* failure) {
  auto bad_reply = [&](const std::string& why) {
    *failure = BackendFailure::kReply;
    return io_error("redis: " + why);
  };
  if (r->type == REDIS_REPLY_ERROR) return bad_reply(std::string(r->str, r->len));
  if (r->type != REDIS_REPLY_ARRAY || r->elements != ops.size() + 1 || r->element[0]->type != REDIS_REPLY_INTEGER) {
    return bad_reply("unexpected reply to the take script");
  }
  TakeResult out;
  out.admitted = r->element[0]->integer == 1;
  out.buckets.resize(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    double level = 0;
    if (!parse_double(r->element[i + 1], &level)) return bad_reply("unexpected level in the take script's reply");
    const BucketOp& op = ops[i];
    const double rate = op.limit_per_minute / 60.0;
    out.buckets[i] = BucketState{.level = level,
                                 .seconds_to_full = std::max(0.0, (op.limit_per_minute - level) / rate),
                                 .seconds_to_need = level >= op.need ? 0.0 : (op.need - level) / rate};
  }
  return out;
}

Result<int> parse_int_part(std::string_view s, int lo, int hi, const char* what, std::string_view url) {
  int v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size() || v < lo || v > hi) {
    return invalid_argument("redis URL '" + std::string(url) + "': " + what + " must be a number in " +
                            std::to_string(lo) + ".." + std::to_string(hi) + ", got '" + std::string(s) +
                            "' (expected redis://HOST:PORT[/DB])");
  }
  return v;
}

}  // namespace

Result<RedisUrl> parse_redis_url(std::string_view url) {
  const std::string form = " (expected redis://HOST:PORT[/DB])";
  auto bad = [&](const std::string& why) {
    return invalid_argument("redis URL '" + std::string(url) + "': " + why + form);
  };
  constexpr std::string_view kScheme = "redis://";
  if (!url.starts_with(kScheme)) return bad("must start with redis://");
  std::string_view rest = url.substr(kScheme.size());
  if (rest.find_first_of("@?#") != std::string_view::npos) return bad("user, password, query and fragment are not supported");
  RedisUrl out;
  std::string_view hostport = rest.substr(0, rest.find('/'));
  if (rest.size() > hostport.size()) {
    std::string_view db = rest.substr(hostport.size() + 1);
    if (!db.empty()) {
      auto v = parse_int_part(db, 0, 1000000, "the database", url);
      if (!v.ok()) return v.status();
      out.db = *v;
    }
  }
  std::string_view port;
  if (hostport.starts_with('[')) {  // [IPv6]:port
    const size_t close = hostport.find(']');
    if (close == std::string_view::npos) return bad("unclosed '[' in the host");
    out.host = std::string(hostport.substr(1, close - 1));
    std::string_view after = hostport.substr(close + 1);
    if (!after.empty() && !after.starts_with(':')) return bad("expected ':' after ']'");
    if (!after.empty()) port = after.substr(1);
    if (after == ":") return bad("empty port");
  } else {
    const size_t colon = hostport.rfind(':');
    out.host = std::string(hostport.substr(0, colon));
    if (colon != std::string_view::npos) {
      port = hostport.substr(colon + 1);
      if (port.empty()) return bad("empty port");
    }
  }
  if (out.host.empty()) return bad("the host is empty");
  if (out.host.find(':') != std::string::npos && !hostport.starts_with('[')) {
    return bad("an IPv6 host goes in brackets, e.g. redis://[::1]:6379");
  }
  if (!port.empty()) {
    auto v = parse_int_part(port, 1, 65535, "the port", url);
    if (!v.ok()) return v.status();
    out.port = *v;
  }
  return out;
}

void RedisBucketStore::ContextDeleter::operator()(redisContext* c) const { redisFree(c); }

RedisBucketStore::RedisBucketStore(RedisOptions options) : options_(std::move(options)) {}

RedisBucketStore::~RedisBucketStore() = default;

std::string RedisBucketStore::describe() const {
  const RedisUrl& u = options_.url;
  const bool v6 = u.host.find(':') != std::string::npos;
  return "redis " + (v6 ? "[" + u.host + "]" : u.host) + ":" + std::to_string(u.port) + "/" + std::to_string(u.db);
}

BackendFailure RedisBucketStore::connect(std::string* error) {
  const timeval connect_tv = to_timeval(options_.connect_timeout);
  errno = 0;
  Context c(redisConnectWithTimeout(options_.url.host.c_str(), options_.url.port, connect_tv));
  const int saved_errno = errno;
  if (!c) {
    *error = "cannot allocate a redis context";
    return BackendFailure::kConnect;
  }
  if (c->err) {
    *error = std::string("connect: ") + c->errstr;
    return classify(c.get(), saved_errno, /*connecting=*/true);
  }
  const timeval command_tv = to_timeval(options_.command_timeout);
  if (redisSetTimeout(c.get(), command_tv) != REDIS_OK) {
    *error = "cannot set the command timeout";
    return BackendFailure::kConnect;
  }
  BackendFailure f = BackendFailure::kNone;
  if (options_.url.db != 0) {
    Reply r = command(c.get(), {"SELECT", std::to_string(options_.url.db)}, /*connecting=*/true, &f, error);
    if (!r) return f;
    if (r->type == REDIS_REPLY_ERROR) {
      *error = "SELECT " + std::to_string(options_.url.db) + ": " + std::string(r->str, r->len);
      return BackendFailure::kReply;
    }
  }
  std::string sha = load_script(c.get(), /*connecting=*/true, &f, error);
  if (sha.empty()) return f;
  std::lock_guard<std::mutex> lock(mu_);
  ctx_ = std::move(c);  // the old connection (if any) is closed here
  sha_ = std::move(sha);
  return BackendFailure::kNone;
}

// Leader/follower batching: a take queues itself; if no batch is in flight
// it leads one, sending every queued take in one write (a pipeline) and
// reading their replies in order; otherwise it waits for a leader to
// answer it. Concurrent takes thus share round trips instead of queueing
// for one each.
Result<TakeResult> RedisBucketStore::take_shared(std::span<const BucketOp> ops, BackendFailure* failure) {
  *failure = BackendFailure::kNone;
  for (const BucketOp& op : ops) RETURN_IF_ERROR(bad_op(op));
  if (ops.empty()) return TakeResult{.admitted = true};
  Pending me{.ops = ops};
  std::unique_lock<std::mutex> lock(queue_mu_);
  queue_.push_back(&me);
  queue_cv_.wait(lock, [&] { return me.done || !batch_in_flight_; });
  if (!me.done) {
    batch_in_flight_ = true;
    std::vector<Pending*> batch;
    batch.swap(queue_);
    lock.unlock();
    run_batch(batch);
    lock.lock();
    for (Pending* p : batch) p->done = true;
    batch_in_flight_ = false;
    queue_cv_.notify_all();
  }
  *failure = me.failure;
  return std::move(*me.result);
}

std::vector<std::string> RedisBucketStore::take_args(std::span<const BucketOp> ops) const {
  std::vector<std::string> args;
  args.reserve(3 + 4 * ops.size());
  args.insert(args.end(), {"EVALSHA", sha_, std::to_string(ops.size())});
  for (const BucketOp& op : ops) args.push_back(options_.key_prefix + op.key);
  for (const BucketOp& op : ops) {
    args.push_back(format_number(op.limit_per_minute));
    args.push_back(format_number(op.need));
    args.push_back(format_number(op.amount));
  }
  return args;
}

// The whole batch under mu_ (the connection): append every EVALSHA, then
// read the replies in order. A connection failure fails the rest of the
// batch alike and drops the connection; takes that met NOSCRIPT run again,
// one by one, after one SCRIPT LOAD.
void RedisBucketStore::run_batch(std::vector<Pending*>& batch) {
  std::lock_guard<std::mutex> lock(mu_);
  auto fail_from = [&](size_t first, BackendFailure f, const std::string& error) {
    for (size_t i = first; i < batch.size(); ++i) {
      batch[i]->failure = f;
      batch[i]->result.emplace(io_error("redis: " + error));
    }
  };
  if (!ctx_) return fail_from(0, BackendFailure::kConnect, "not connected");
  n_round_trips_.fetch_add(1, std::memory_order_relaxed);
  n_takes_.fetch_add(static_cast<int64_t>(batch.size()), std::memory_order_relaxed);
  for (Pending* p : batch) {
    const std::vector<std::string> args = take_args(p->ops);
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (const std::string& a : args) argv.push_back(a.data()), lens.push_back(a.size());
    if (redisAppendCommandArgv(ctx_.get(), static_cast<int>(args.size()), argv.data(), lens.data()) != REDIS_OK) {
      ctx_.reset();  // a half-written pipeline cannot be read back
      return fail_from(0, BackendFailure::kIo, "cannot queue the command (out of memory)");
    }
  }
  std::vector<Pending*> again;
  for (size_t i = 0; i < batch.size(); ++i) {
    void* raw = nullptr;
    errno = 0;
    const int rc = redisGetReply(ctx_.get(), &raw);
    const int saved_errno = errno;
    Reply r(static_cast<redisReply*>(raw));
    if (rc != REDIS_OK || !r) {
      const BackendFailure f = classify(ctx_.get(), saved_errno, /*connecting=*/false);
      std::string error = ctx_->errstr[0] ? ctx_->errstr : "no reply";
      if (f == BackendFailure::kTimeout) error += " (timeout)";
      ctx_.reset();  // unusable after an I/O error or a timeout (a late reply would be misread)
      return fail_from(i, f, error);
    }
    if (r->type == REDIS_REPLY_ERROR && std::string_view(r->str, r->len).starts_with("NOSCRIPT")) {
      again.push_back(batch[i]);
      continue;
    }
    batch[i]->result.emplace(parse_take_reply(r.get(), batch[i]->ops, &batch[i]->failure));
  }
  if (!again.empty()) retry_after_noscript(again);
}

// The server lost its script cache (a restart, SCRIPT FLUSH): load the
// script again, once, and run these takes one by one (mu_ held).
void RedisBucketStore::retry_after_noscript(std::vector<Pending*>& takes) {
  BackendFailure f = BackendFailure::kNone;
  std::string error;
  sha_ = load_script(ctx_.get(), /*connecting=*/false, &f, &error);
  for (Pending* p : takes) {
    Reply r = sha_.empty() ? nullptr : command(ctx_.get(), take_args(p->ops), /*connecting=*/false, &f, &error);
    if (!r) {
      p->failure = f == BackendFailure::kNone ? BackendFailure::kReply : f;
      p->result.emplace(io_error("redis: " + error));
      continue;
    }
    p->result.emplace(parse_take_reply(r.get(), p->ops, &p->failure));
  }
  if (ctx_->err) ctx_.reset();
}

Result<std::unique_ptr<FailoverBucketStore>> open_redis_bucket_store(std::string_view url, std::string_view fail_mode,
                                                                     obs::Registry* registry) {
  ASSIGN_OR_RETURN(RedisUrl u, parse_redis_url(url));
  if (fail_mode != "open" && fail_mode != "closed") {
    return invalid_argument("redis-fail must be open or closed, got '" + std::string(fail_mode) + "'");
  }
  auto store = std::make_unique<FailoverBucketStore>(
      std::make_unique<RedisBucketStore>(RedisOptions{.url = std::move(u)}),
      FailoverOptions{.mode = fail_mode == "open" ? FailMode::kOpen : FailMode::kClosed, .registry = registry});
  store->start();
  return store;
}

}  // namespace zl::limits
