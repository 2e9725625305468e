// An embedding service over HTTP: the client (HttpEmbedder) and the noise-protected server (EmbeddingServer).
// Protocol (OpenAI-style): POST {url}/v1/embeddings  {"model": m, "input": [texts]}
//                       → {"object": "list", "model": m, "data": [{"object": "embedding", "index": i, "embedding": [...]}]}
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "model/release/embedder.h"

namespace httplib {
class Server;
}

namespace daei {
struct ParkedConnection;  // model/release/http_connections.h
class HeadReactor;

// The connection threads: one per request being answered, up to `max`, started as needed; jobs beyond `max` wait for
// a free thread, and below it no job ever waits (a fixed pool of N would leave a burst queued behind busy threads).
class ConnectionThreads {
 public:
  explicit ConnectionThreads(size_t max) : max_(max) {}
  ~ConnectionThreads();
  ConnectionThreads(const ConnectionThreads&) = delete;
  ConnectionThreads& operator=(const ConnectionThreads&) = delete;
  void enqueue(std::function<void()> fn);
  void shutdown();  // runs the jobs already queued, then joins every thread
  size_t threads() const;

 private:
  void work();
  const size_t max_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  std::vector<std::thread> threads_;
  size_t idle_ = 0;
  bool shutdown_ = false;
};

struct HttpEmbedderOptions {
  std::string url;           // http://host:port or https://host[:port]
  std::string model;         // sent as "model"; part of id()
  std::string api_key;       // sent as "Authorization: Bearer …"; never logged or printed
  int64_t dim = 0;           // expected dimension; 0 = learn it from the first answer, then enforce it
  int64_t batch_size = 64;   // texts per request
  int64_t concurrency = 2;   // requests in flight at once
  double timeout_s = 30.0;   // connect and read timeout of one request
  int64_t retries = 4;       // extra attempts on 429, 5xx and connection errors; backoff 0.2 s · 2^k
  double backoff_s = 0.2;
  // The embedder.* keys read as they are, listed once (core/fields.h), a line a topic.
  template <class Self, class Visit>
  static void fields(Self& s, Visit&& v) {
    v("url", s.url), v("model", s.model), v("dim", s.dim);
    v("batch_size", s.batch_size), v("concurrency", s.concurrency);
    v("timeout_s", s.timeout_s), v("retries", s.retries);
  }
  // The keys of fields(), and api_key from the environment variable that embedder.api_key_env names.
  static HttpEmbedderOptions from_config(const Config& cfg);
};

class HttpEmbedder final : public Embedder {
 public:
  explicit HttpEmbedder(HttpEmbedderOptions opt);
  int64_t dim() const override;  // asks the service once (a one-text query) when not configured
  std::string id() const override { return "http:" + opt_.url + "#" + opt_.model; }
  at::Tensor embed(const std::vector<std::string>& texts) const override;
  int64_t requests() const { return requests_.load(); }  // HTTP requests sent, retries included

 private:
  at::Tensor embed_batch(const std::vector<std::string>& texts) const;
  HttpEmbedderOptions opt_;
  std::string host_, base_;
  int port_ = 80;
  mutable std::atomic<int64_t> dim_{0};
  mutable std::atomic<int64_t> requests_{0};
};

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                   // 0: pick a free port (port() tells which)
  int64_t max_batch = 256;           // texts per request
  size_t max_body_bytes = 1 << 20;
  std::string api_key;               // empty: no authentication
  std::string model = "daei";        // reported in answers
  int threads = 4;                   // embeddings computed at once
  int max_connections = 256;         // requests served at once (one thread each); more wait for a thread
  int64_t max_pending = 8192;        // connections waiting for a whole request head (no thread: http_connections.h)
  double read_timeout_s = 5.0;       // a connection silent this long is closed (idle keep-alive too)
  double request_timeout_s = 30.0;   // a request's head and body are due this long after it began (408)
  int backlog = 1024;                // listen backlog
  // server.host / port / max_batch / max_body_bytes / api_key_file / api_key_env / threads / max_connections /
  // max_pending / read_timeout_s / request_timeout_s.
  static ServerOptions from_config(const Config& cfg);
};

// Serves embedder.embed(texts) (fresh noise per query when noisy). Thread-safe; never crashes on input:
// malformed JSON, missing or wrongly typed fields, empty or oversize batches → 400 {"error": {"message": …}};
// bad or missing bearer key → 401, decided from the headers before any of the body is parsed (a body of known length
// up to min(64 KiB, max_body_bytes) has been received by then, unparsed); a body over
// max_body_bytes → 413, counted on the bytes received (Content-Length, chunked or unframed alike); a compressed body
// (Content-Encoding) → 415, so nothing is ever inflated. A connection waits for its request head without a thread
// (HeadReactor: up to max_pending of them, each due within request_timeout_s, silent ones closed after
// read_timeout_s), so slow clients hold no thread; a complete request gets one of max_connections threads; the
// embedding itself runs at most `threads` at a time. The port is bound without SO_REUSEPORT (a second server on a used port fails), backlog 1024.
class EmbeddingServer {
 public:
  EmbeddingServer(std::function<at::Tensor(const std::vector<std::string>&)> embed, ServerOptions opt);
  ~EmbeddingServer();
  void start();          // binds (throws naming host:port on failure) and serves on a background thread
  void run();            // binds and serves on this thread until stop()
  void stop();
  int port() const { return port_; }
  int64_t served() const { return served_.load(); }

 private:
  void bind();
  std::function<at::Tensor(const std::vector<std::string>&)> embed_;
  ServerOptions opt_;
  void install_request_rules();
  void install_routes();
  void serve_connection(ParkedConnection c);  // one request on a connection thread, then park again or close
  std::unique_ptr<ConnectionThreads> workers_;
  std::unique_ptr<HeadReactor> reactor_;
  std::unique_ptr<httplib::Server> srv_;
  std::thread thread_;
  int port_ = 0;
  std::atomic<int64_t> served_{0};
  int listen_fd_ = -1;               // the listening socket (seen by the socket-options hook)
  std::mutex compute_mu_;
  std::condition_variable compute_cv_;
  int computing_ = 0;
};

bool constant_time_equal(const std::string& a, const std::string& b);

}  // namespace daei
