#include "model/release/http_embedder.h"

#include "model/release/httplib_config.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "core/config.h"
#include "core/error.h"
#include "core/fields.h"
#include "core/fsutil.h"
#include "core/log.h"
#include "model/release/embedding_request.h"
#include "model/release/embeddings_answer.h"
#include "model/release/http_connections.h"

namespace daei {
using nlohmann::json;

bool constant_time_equal(const std::string& a, const std::string& b) {
  // Runs over the longer length whatever the contents; the length difference is folded into the result.
  size_t n = std::max(a.size(), b.size());
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    unsigned char x = i < a.size() ? a[i] : 0, y = i < b.size() ? b[i] : 0;
    diff |= x ^ y;
  }
  return diff == 0;
}

// ---------------------------------------------------------------------------------------------------------------
// Client

HttpEmbedderOptions HttpEmbedderOptions::from_config(const Config& cfg) {
  HttpEmbedderOptions o;
  fields(o, config_reader(cfg, "embedder"));
  const std::string env = cfg.str("embedder.api_key_env");
  if (!env.empty()) {
    const char* k = std::getenv(env.c_str());
    DAEI_CHECK(k && *k, "embedder.api_key_env names the environment variable {}, which is not set", env);
    o.api_key = k;
  }
  return o;
}

HttpEmbedder::HttpEmbedder(HttpEmbedderOptions opt) : opt_(std::move(opt)) {
  const std::string& u = opt_.url;
  DAEI_CHECK(!u.empty(), "embedder.kind=http needs embedder.url (e.g. http://127.0.0.1:8080)");
  const bool tls = u.rfind("https://", 0) == 0;
  DAEI_CHECK(tls || u.rfind("http://", 0) == 0, "embedder.url must start with http:// or https://, got '{}'", u);
  std::string rest = u.substr(tls ? 8 : 7);
  if (auto slash = rest.find('/'); slash != std::string::npos) {
    DAEI_CHECK(rest.substr(slash).find_first_not_of('/') == std::string::npos,
               "embedder.url must be scheme://host[:port] without a path, got '{}'", u);
    rest = rest.substr(0, slash);
  }
  port_ = tls ? 443 : 80;
  if (auto colon = rest.rfind(':'); colon != std::string::npos) {
    host_ = rest.substr(0, colon);
    try {
      port_ = std::stoi(rest.substr(colon + 1));
    } catch (...) {
      DAEI_FAIL("embedder.url has a bad port: '{}'", u);
    }
  } else {
    host_ = rest;
  }
  DAEI_CHECK(!host_.empty() && port_ > 0 && port_ < 65536, "embedder.url has no usable host:port: '{}'", u);
  base_ = fmt::format("{}://{}:{}", tls ? "https" : "http", host_, port_);
  DAEI_CHECK(opt_.batch_size > 0 && opt_.concurrency > 0 && opt_.retries >= 0 && opt_.timeout_s > 0,
             "embedder.batch_size, concurrency and timeout_s must be > 0 and retries >= 0");
  dim_ = opt_.dim;
}

int64_t HttpEmbedder::dim() const {
  if (dim_.load() == 0) embed_batch({"dimension probe"});
  return dim_.load();
}

at::Tensor HttpEmbedder::embed_batch(const std::vector<std::string>& texts) const {
  httplib::Client cli(base_);
  auto to = std::chrono::duration<double>(opt_.timeout_s);
  cli.set_connection_timeout(std::chrono::duration_cast<std::chrono::microseconds>(to));
  cli.set_read_timeout(std::chrono::duration_cast<std::chrono::microseconds>(to));
  cli.set_write_timeout(std::chrono::duration_cast<std::chrono::microseconds>(to));
  httplib::Headers headers;
  if (!opt_.api_key.empty()) headers.emplace("Authorization", "Bearer " + opt_.api_key);
  const std::string body = json{{"model", opt_.model}, {"input", texts}}.dump();
  std::string last;
  for (int64_t attempt = 0; attempt <= opt_.retries; ++attempt) {
    if (attempt) {
      double wait = opt_.backoff_s * double(1LL << std::min<int64_t>(attempt - 1, 10));
      std::this_thread::sleep_for(std::chrono::duration<double>(wait));
    }
    requests_.fetch_add(1);
    auto res = cli.Post("/v1/embeddings", headers, body, "application/json");
    if (!res) {
      auto err = res.error();
      last = (err == httplib::Error::Read || err == httplib::Error::ConnectionTimeout)
                 ? fmt::format("timed out after {} s ({})", opt_.timeout_s, httplib::to_string(err))
                 : httplib::to_string(err);
      continue;
    }
    int64_t d = dim_.load();
    EmbeddingsAnswer a =
        read_embeddings_answer(res->status, res->body, texts.size(), d, opt_.url, !opt_.api_key.empty());
    if (!a.retry.empty()) {
      last = a.retry;
      continue;
    }
    if (d == 0) {  // the first answer fixes the dimension for every thread
      int64_t expected = 0;
      dim_.compare_exchange_strong(expected, a.dim);
      DAEI_CHECK(a.dim == dim_.load(), "embedding service {} returned a {}-d vector, expected {} (embedder.dim)",
                 opt_.url, a.dim, dim_.load());
    }
    return torch::from_blob(a.values.data(), {int64_t(texts.size()), a.dim}, torch::kFloat32).clone();
  }
  DAEI_FAIL("embedding service {} failed after {} attempts: {}", opt_.url, opt_.retries + 1, last);
}

at::Tensor HttpEmbedder::embed(const std::vector<std::string>& texts) const {
  const int64_t n = texts.size(), bs = opt_.batch_size;
  const int64_t nb = (n + bs - 1) / bs;
  std::vector<at::Tensor> parts(nb);
  std::atomic<int64_t> next{0};
  std::exception_ptr err;
  std::mutex mu;
  auto work = [&] {
    for (int64_t b; (b = next.fetch_add(1)) < nb;) {
      {
        std::lock_guard<std::mutex> lk(mu);
        if (err) return;
      }
      try {
        std::vector<std::string> chunk(texts.begin() + b * bs, texts.begin() + std::min(n, (b + 1) * bs));
        parts[b] = embed_batch(chunk);
      } catch (...) {
        std::lock_guard<std::mutex> lk(mu);
        if (!err) err = std::current_exception();
      }
    }
  };
  const int64_t workers = std::min(opt_.concurrency, nb);
  if (workers <= 1) {
    work();
  } else {
    std::vector<std::thread> pool;
    for (int64_t w = 0; w < workers; ++w) pool.emplace_back(work);
    for (auto& t : pool) t.join();
  }
  if (err) std::rethrow_exception(err);
  if (nb == 0) return torch::empty({0, dim()}, torch::kFloat32);
  return torch::cat(parts);
}

// ---------------------------------------------------------------------------------------------------------------
// Server

ServerOptions ServerOptions::from_config(const Config& cfg) {
  ServerOptions o;
  o.host = cfg.str("server.host");
  o.port = int(cfg.integer("server.port"));
  o.max_batch = cfg.integer("server.max_batch");
  o.max_body_bytes = size_t(cfg.integer("server.max_body_bytes"));
  o.threads = int(cfg.integer("server.threads"));
  o.max_connections = int(cfg.integer("server.max_connections"));
  o.max_pending = cfg.integer("server.max_pending");
  o.read_timeout_s = cfg.real("server.read_timeout_s");
  o.request_timeout_s = cfg.real("server.request_timeout_s");
  o.model = cfg.str("server.model");
  const std::string file = cfg.str("server.api_key_file"), env = cfg.str("server.api_key_env");
  DAEI_CHECK(file.empty() || env.empty(), "set at most one of server.api_key_file and server.api_key_env");
  if (!file.empty()) {
    o.api_key = read_file(file);
    while (!o.api_key.empty() && std::isspace(static_cast<unsigned char>(o.api_key.back()))) o.api_key.pop_back();
    DAEI_CHECK(!o.api_key.empty(), "server.api_key_file {} is empty", file);
  } else if (!env.empty()) {
    const char* k = std::getenv(env.c_str());
    DAEI_CHECK(k && *k, "server.api_key_env names the environment variable {}, which is not set", env);
    o.api_key = k;
  }
  return o;
}

namespace {
void json_error(httplib::Response& res, int status, const std::string& msg) {
  res.status = status;
  res.set_content(json_error_body(msg), "application/json");
}

// Bodies over max_body_bytes up to this size are read and discarded before the 413 goes out (see the constructor).
size_t drain_limit(const ServerOptions& o) { return o.max_body_bytes + (size_t(16) << 20); }

// Set by the body reader when the body went over the limit, read by the error handler (same thread).
thread_local bool t_body_too_large = false;
}  // namespace

ConnectionThreads::~ConnectionThreads() { shutdown(); }

void ConnectionThreads::enqueue(std::function<void()> fn) {
  std::unique_lock<std::mutex> lk(mu_);
  if (shutdown_) return;
  jobs_.push_back(std::move(fn));
  // A thread woken by an earlier enqueue still counts as idle until it takes its job, so "no idle thread" would
  // leave a burst of connections queued behind that one thread (a normal request then waited ~2 s behind idle
  // connections in e2e_bad_serve). Every queued job needs a waiting thread of its own.
  if (jobs_.size() > idle_ && threads_.size() < max_) threads_.emplace_back([this] { work(); });
  cv_.notify_one();
}

void ConnectionThreads::shutdown() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    shutdown_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
  threads_.clear();
}

size_t ConnectionThreads::threads() const {
  std::lock_guard<std::mutex> lk(mu_);
  return threads_.size();
}

void ConnectionThreads::work() {
  for (;;) {
    std::function<void()> fn;
    {
      std::unique_lock<std::mutex> lk(mu_);
      ++idle_;
      cv_.wait(lk, [&] { return shutdown_ || !jobs_.empty(); });
      --idle_;
      if (jobs_.empty()) return;  // shutdown
      fn = std::move(jobs_.front());
      jobs_.pop_front();
    }
    fn();
  }
}

EmbeddingServer::EmbeddingServer(std::function<at::Tensor(const std::vector<std::string>&)> embed, ServerOptions opt)
    : embed_(std::move(embed)), opt_(std::move(opt)) {
  DAEI_CHECK(opt_.max_batch > 0 && opt_.max_body_bytes > 0 && opt_.threads > 0 && opt_.max_connections > 0 &&
                 opt_.max_pending > 0 && opt_.read_timeout_s > 0 && opt_.request_timeout_s > 0,
             "server.max_batch, max_body_bytes, threads, max_connections, max_pending, read_timeout_s and "
             "request_timeout_s must be > 0");
  // accept → reactor (until the request head is in) → a connection thread (one request) → reactor again or close.
  workers_ = std::make_unique<ConnectionThreads>(size_t(opt_.max_connections));
  ReactorLimits lim;
  lim.max_pending = size_t(opt_.max_pending);
  lim.request_timeout_s = opt_.request_timeout_s;
  lim.idle_timeout_s = opt_.read_timeout_s;
  lim.max_prefetch_bytes = std::min<size_t>(lim.max_prefetch_bytes, opt_.max_body_bytes);
  reactor_ = std::make_unique<HeadReactor>(lim, [this](ParkedConnection c) {
    workers_->enqueue([this, c = std::move(c)]() mutable { serve_connection(std::move(c)); });
  });
  srv_ = make_parking_server([this](int fd) { reactor_->park(ParkedConnection{fd, {}, 0, {}}); });
  install_request_rules();
  install_routes();
}

// Limits, refusals and error answers: what every request meets before and around its route.
void EmbeddingServer::install_request_rules() {
  // A body over max_body_bytes but under the drain limit is read and discarded before the 413 goes out: a client
  // that sends its whole body before reading (Python's http.client) would otherwise meet a reset and never see
  // the 413. Larger declared bodies are refused at once, unread.
  srv_->set_payload_max_length(drain_limit(opt_));
  // Reads and writes wait as serve_connection tells RequestStream; httplib's own timeouts are not used, except
  // that its Keep-Alive answer header reports this one.
  srv_->set_keep_alive_timeout(std::max<time_t>(1, time_t(opt_.read_timeout_s)));
  // The listening socket: SO_REUSEADDR (restart while old connections linger in TIME_WAIT) but not SO_REUSEPORT,
  // which would let a second server share the port and its traffic.
  srv_->set_socket_options([this](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    listen_fd_ = sock;
  });
  srv_->set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
    json_error(res, 500, "internal error");
  });
  srv_->set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (t_body_too_large) {
      t_body_too_large = false;
      return json_error(res, 413, "request body too large");
    }
    if (res.body.empty()) {
      std::string msg = res.status == 413 ? "request body too large" : res.status == 404 ? "not found" : "error";
      json_error(res, res.status, msg);
    }
  });
  // Decided from the request line and headers alone, before any of the body is read.
  srv_->set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    t_body_too_large = false;
    if (req.method != "POST") return httplib::Server::HandlerResponse::Unhandled;
    auto refuse = [&](int status, const std::string& msg) {
      json_error(res, status, msg);
      res.set_header("Connection", "close");  // the unread body must not be taken for the next request
      return httplib::Server::HandlerResponse::Handled;
    };
    if (!opt_.api_key.empty() &&
        !constant_time_equal(req.get_header_value("Authorization"), "Bearer " + opt_.api_key)) {
      res.set_header("WWW-Authenticate", "Bearer");
      return refuse(401, "missing or wrong API key");
    }
    const std::string enc = req.get_header_value("Content-Encoding");
    if (!enc.empty() && enc != "identity")
      return refuse(415, "compressed request bodies (Content-Encoding: " + enc.substr(0, 32) + ") are not accepted");
    if (req.has_header("Content-Length")) {
      const std::string len = req.get_header_value("Content-Length");
      char* end = nullptr;
      errno = 0;
      const unsigned long long n = std::strtoull(len.c_str(), &end, 10);
      if (len.empty() || *end != '\0' || errno != 0 || len[0] == '-')
        return refuse(400, "bad Content-Length");
      if (n > drain_limit(opt_)) return refuse(413, "request body too large");
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
}

void EmbeddingServer::install_routes() {
  srv_->Get("/health", [](const httplib::Request&, httplib::Response& res) { res.set_content("ok\n", "text/plain"); });
  srv_->Post("/v1/embeddings", [this](const httplib::Request&, httplib::Response& res,
                                      const httplib::ContentReader& content_reader) {
    // The body, counted as it arrives: chunked and unframed bodies stop at max_body_bytes as well.
    // Past the limit the rest is drained unkept, up to drain_limit(opt_) in all (httplib's payload limit).
    std::string body;
    bool too_large = false;
    const bool ok = content_reader([&](const char* data, size_t len) {
      if (too_large || body.size() + len > opt_.max_body_bytes) {
        too_large = true;
        body.clear();
        return true;
      }
      body.append(data, len);
      return true;
    });
    if (too_large) {
      res.set_header("Connection", "close");
      return json_error(res, 413, "request body too large");
    }
    if (!ok) {  // cut off (malformed chunks, past its deadline): what is left of it on the wire is no next request
      res.set_header("Connection", "close");
      return json_error(res, 400, "cannot read the request body");
    }
    std::vector<std::string> texts;
    if (std::string err = parse_embedding_request(body, opt_.max_batch, texts); !err.empty())
      return json_error(res, 400, err);
    at::Tensor y;
    try {
      std::unique_lock<std::mutex> lk(compute_mu_);
      compute_cv_.wait(lk, [&] { return computing_ < opt_.threads; });
      ++computing_;
      lk.unlock();
      struct Release {
        EmbeddingServer* s;
        ~Release() {
          {
            std::lock_guard<std::mutex> g(s->compute_mu_);
            --s->computing_;
          }
          s->compute_cv_.notify_one();
        }
      } release{this};
      y = embed_(texts).contiguous();
    } catch (const std::exception& e) {
      LOG_WARN("[serve] embedding failed: {}", e.what());
      return json_error(res, 500, "embedding failed");
    }
    const int64_t d = y.size(1);
    const float* p = y.data_ptr<float>();
    json data = json::array();
    for (size_t i = 0; i < texts.size(); ++i)
      data.push_back({{"object", "embedding"}, {"index", i}, {"embedding", std::vector<float>(p + i * d, p + (i + 1) * d)}});
    served_.fetch_add(texts.size());
    res.set_content(json{{"object", "list"}, {"model", opt_.model}, {"data", std::move(data)},
                         {"usage", {{"prompt_tokens", 0}, {"total_tokens", 0}}}}.dump(),
                    "application/json");
  });
}

EmbeddingServer::~EmbeddingServer() { stop(); }

namespace {
// Why host:port cannot be bound, in the words of the system ("Address already in use"), found by trying it.
std::string bind_error(const std::string& host, int port) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  if (int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res); rc != 0)
    return gai_strerror(rc);
  std::string why = "unknown reason";
  for (auto* a = res; a; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) continue;
    int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0)
      why = errno == EADDRINUSE ? "address in use" : std::strerror(errno);
    ::close(fd);
  }
  ::freeaddrinfo(res);
  return why;
}
}  // namespace

void EmbeddingServer::bind() {
  if (opt_.port == 0) {
    port_ = srv_->bind_to_any_port(opt_.host);
    DAEI_CHECK(port_ > 0, "cannot bind {} on any port: {}", opt_.host, bind_error(opt_.host, 0));
  } else {
    DAEI_CHECK(srv_->bind_to_port(opt_.host, opt_.port), "cannot bind {}:{}: {}", opt_.host, opt_.port,
               bind_error(opt_.host, opt_.port));
    port_ = opt_.port;
  }
  // httplib listens with a backlog of 5; listen() again on the bound socket raises it (one request in ~4,000
  // waited ~1 s for a SYN retry under load with 5).
  if (listen_fd_ >= 0) ::listen(listen_fd_, opt_.backlog);
}

void EmbeddingServer::start() {
  bind();
  thread_ = std::thread([this] { srv_->listen_after_bind(); });
  for (int i = 0; i < 5000 && !srv_->is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  DAEI_CHECK(srv_->is_running(), "embedding server on {}:{} did not start", opt_.host, port_);
}

void EmbeddingServer::run() {
  bind();
  srv_->listen_after_bind();
}

void EmbeddingServer::serve_connection(ParkedConnection c) {
  constexpr double kWriteTimeoutS = 10.0;  // an answer that cannot be sent in this long is dropped
  if (serve_parked_request(*srv_, c, opt_.read_timeout_s, kWriteTimeoutS))
    reactor_->park(std::move(c));
  else
    close_connection(c.fd);
}

void EmbeddingServer::stop() {
  if (srv_) srv_->stop();
  if (thread_.joinable()) thread_.join();
  if (reactor_) reactor_->stop();    // closes the connections still sending their heads
  if (workers_) workers_->shutdown();  // answers the requests already handed over (their re-parks close)
}

}  // namespace daei
