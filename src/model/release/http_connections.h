// serve-embedder's connections between accept and a complete request head. httplib gives every connection a
// thread from accept to close, and its read timeout applies to each read, not to the request: 1,000 clients that
// send a header byte a second (slowloris) held all 256 threads and valid requests waited in the backlog
// (results/fuzzing.md). Here a connection waits for its request head on one reactor thread (epoll), holding a
// descriptor and the bytes it sent, and is handed to a connection thread only once the head is complete; between
// keep-alive requests it waits here again. A body of known length up to max_prefetch_bytes is awaited here too, so a
// client that trickles its body holds no thread either; a chunked or longer body is read on the thread. Every wait has a deadline: the request head and body must be in within
// request_timeout_s of parking, and a connection silent for idle_timeout_s is closed.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace httplib {
class Server;
}

namespace daei {

struct ParkedConnection {
  int fd = -1;
  std::string read_ahead;  // bytes received and not yet consumed: the head, and pipelined requests after it
  int answered = 0;        // requests answered on this connection so far
  std::chrono::steady_clock::time_point deadline;  // set by park(): the request's head and body are due by then
};

// One past the blank line that ends the request head in `bytes` ("\r\n\r\n", or "\n\n" as httplib also reads),
// or std::string::npos while it is incomplete. Leading blank lines (allowed before a request line) are skipped.
size_t request_head_end(const std::string& bytes);

// How many body bytes follow a complete head that the reactor should wait for: its Content-Length when that is a
// plain number up to `cap` and no Transfer-Encoding is named, else 0 (the connection thread reads the body).
size_t body_to_prefetch(const std::string& head, size_t cap);

struct ReactorLimits {
  size_t max_pending = 8192;         // connections parked at once; beyond, the one nearest its deadline gets 503
  size_t max_head_bytes = 65536;     // a longer head gets 431
  size_t max_prefetch_bytes = 65536; // bodies up to this size are awaited in the reactor (memory: pending × both)
  double request_timeout_s = 30;   // head (and body, read on the thread) due this long after parking: 408
  double idle_timeout_s = 5;       // a parked connection silent this long is closed (408 if it had sent bytes)
};

class HeadReactor {
 public:
  using Ready = std::function<void(ParkedConnection)>;  // called on the reactor thread: must not block
  HeadReactor(ReactorLimits limits, Ready ready);
  ~HeadReactor();
  HeadReactor(const HeadReactor&) = delete;
  HeadReactor& operator=(const HeadReactor&) = delete;

  // Any thread. The reactor owns c.fd from here: it hands it to `ready` or closes it (also when stopped).
  void park(ParkedConnection c);
  void stop();  // closes every parked connection and joins the thread; later parks close at once

  struct Counts {
    int64_t parked = 0, handed = 0, timed_out = 0, evicted = 0, head_too_large = 0, closed_by_peer = 0;
  };
  Counts counts() const;
  size_t pending() const;

 private:
  struct Entry {
    ParkedConnection c;
    size_t need = 0;  // once the head is in: head + body bytes to wait for
    std::chrono::steady_clock::time_point expiry;  // min(deadline, last byte + idle timeout)
  };
  void loop();
  void take_incoming();
  void add(ParkedConnection c);
  void read_from(int fd);
  bool complete(Entry& e) const;  // the head, and a prefetched body, are all in
  void refresh_expiry(Entry& e, std::chrono::steady_clock::time_point last_byte);
  // Counts the drop under `why` (none: nullptr), answers status (0: nothing) and closes.
  void drop(int fd, int64_t Counts::*why, int status, const char* message);
  void hand(int fd);

  const ReactorLimits lim_;
  const Ready ready_;
  int epoll_fd_ = -1, wake_fd_ = -1;
  mutable std::mutex mu_;                   // guards incoming_, stopped_, counts_, pending_
  std::vector<ParkedConnection> incoming_;  // parked by other threads, not yet in the epoll set
  bool stopped_ = false;
  Counts counts_;
  size_t pending_ = 0;
  std::map<int, Entry> conns_;  // reactor thread only
  std::set<std::pair<std::chrono::steady_clock::time_point, int>> by_expiry_;
  std::thread thread_;
};

// An httplib::Server whose accepted connections go to `on_accept` (the reactor) instead of a thread of their own.
std::unique_ptr<httplib::Server> make_parking_server(std::function<void(int fd)> on_accept);

// Answers the request at the front of c on this thread with `srv` (made by make_parking_server): reads the rest of
// its head and its body from c.read_ahead and then the socket, each read waiting at most read_timeout_s and never
// past c.deadline. True when the connection may wait for another request (keep-alive, the answer did not say
// "Connection: close", fewer than httplib's keep-alive maximum answered); c.read_ahead then holds what was read past
// this request.
bool serve_parked_request(httplib::Server& srv, ParkedConnection& c, double read_timeout_s, double write_timeout_s);

// The body of every error answer: {"error": {"message": …, "type": "invalid_request_error"}} (OpenAI's shape).
std::string json_error_body(const std::string& message);

// shutdown() then close(), as httplib ends a connection.
void close_connection(int fd);

}  // namespace daei
