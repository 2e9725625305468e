#include "model/release/http_connections.h"

#include "model/release/httplib_config.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace daei {
using Clock = std::chrono::steady_clock;

namespace {
Clock::duration seconds(double s) { return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s)); }

// Milliseconds from now to t for poll/epoll_wait: 0 when past, rounded up so that a wait never ends early.
int millis_until(Clock::time_point t) {
  const auto d = t - Clock::now();
  if (d <= Clock::duration::zero()) return 0;
  return int(std::min<int64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(d).count() + 1, 1 << 30));
}

// A short error answer sent without blocking (the socket buffer of a fresh connection holds it), then the close.
void answer_and_close(int fd, int status, const char* message) {
  if (status != 0) {
    const char* reason = status == 408 ? "Request Timeout" : status == 431 ? "Request Header Fields Too Large"
                                                                            : "Service Unavailable";
    const std::string body = json_error_body(message);
    const std::string out = "HTTP/1.1 " + std::to_string(status) + " " + reason +
                            "\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: " +
                            std::to_string(body.size()) + "\r\n\r\n" + body;
    [[maybe_unused]] ssize_t n = ::send(fd, out.data(), out.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  }
  close_connection(fd);
}
}  // namespace

std::string json_error_body(const std::string& message) {
  return nlohmann::json{{"error", {{"message", message}, {"type", "invalid_request_error"}}}}.dump();
}

void close_connection(int fd) {
  ::shutdown(fd, SHUT_RDWR);
  ::close(fd);
}

size_t request_head_end(const std::string& bytes) {
  const size_t n = bytes.size();
  for (size_t i = bytes.find('\n'); i != std::string::npos && i < n; i = bytes.find('\n', i + 1)) {
    size_t j = i + 1;
    if (j < n && bytes[j] == '\r') ++j;
    if (j < n && bytes[j] == '\n') return j + 1;
  }
  return std::string::npos;
}

size_t body_to_prefetch(const std::string& head, size_t cap) {
  std::string h = head;
  std::transform(h.begin(), h.end(), h.begin(), [](unsigned char ch) { return char(std::tolower(ch)); });
  if (h.find("\ntransfer-encoding:") != std::string::npos) return 0;
  const size_t at = h.find("\ncontent-length:");
  if (at == std::string::npos) return 0;
  size_t i = at + 16, n = 0, digits = 0;
  while (i < h.size() && (h[i] == ' ' || h[i] == '\t')) ++i;
  for (; i < h.size() && h[i] >= '0' && h[i] <= '9'; ++i, ++digits) {
    n = n * 10 + size_t(h[i] - '0');
    if (n > cap) return 0;
  }
  while (i < h.size() && (h[i] == ' ' || h[i] == '\t')) ++i;
  const bool plain = digits > 0 && i < h.size() && (h[i] == '\r' || h[i] == '\n');
  return plain ? n : 0;
}

// ---------------------------------------------------------------------------------------------------------------
// HeadReactor

HeadReactor::HeadReactor(ReactorLimits limits, Ready ready) : lim_(limits), ready_(std::move(ready)) {
  DAEI_CHECK(lim_.max_pending > 0 && lim_.max_head_bytes > 0 && lim_.request_timeout_s > 0 && lim_.idle_timeout_s > 0,
             "connection limits must be > 0");
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  DAEI_CHECK(epoll_fd_ >= 0 && wake_fd_ >= 0, "cannot create the connection reactor: {}", std::strerror(errno));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = wake_fd_;
  DAEI_CHECK(::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev) == 0, "epoll_ctl: {}", std::strerror(errno));
  thread_ = std::thread([this] { loop(); });
}

HeadReactor::~HeadReactor() {
  stop();
  ::close(epoll_fd_);
  ::close(wake_fd_);
}

void HeadReactor::park(ParkedConnection c) {
  c.deadline = Clock::now() + seconds(lim_.request_timeout_s);
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!stopped_) {
      incoming_.push_back(std::move(c));
      ++counts_.parked;
      ++pending_;
      c.fd = -1;
    }
  }
  if (c.fd >= 0) return close_connection(c.fd);
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof one);
}

void HeadReactor::stop() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof one);
  if (thread_.joinable()) thread_.join();
  for (auto& [fd, e] : conns_) close_connection(fd);
  conns_.clear();
  by_expiry_.clear();
  std::lock_guard<std::mutex> lk(mu_);
  for (auto& c : incoming_) close_connection(c.fd);
  incoming_.clear();
  pending_ = 0;
}

HeadReactor::Counts HeadReactor::counts() const {
  std::lock_guard<std::mutex> lk(mu_);
  return counts_;
}

size_t HeadReactor::pending() const {
  std::lock_guard<std::mutex> lk(mu_);
  return pending_;
}

void HeadReactor::loop() {
  std::vector<epoll_event> events(256);
  for (;;) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (stopped_) return;
    }
    const int wait_ms = by_expiry_.empty() ? 1000 : std::min(1000, millis_until(by_expiry_.begin()->first));
    const int n = ::epoll_wait(epoll_fd_, events.data(), int(events.size()), wait_ms);
    for (int i = 0; i < n; ++i) {
      if (events[i].data.fd == wake_fd_) {
        uint64_t v;
        while (::read(wake_fd_, &v, sizeof v) > 0) {
        }
        take_incoming();
      } else {
        read_from(events[i].data.fd);
      }
    }
    const auto now = Clock::now();
    while (!by_expiry_.empty() && by_expiry_.begin()->first <= now) {
      const int fd = by_expiry_.begin()->second;
      const bool sent_some = !conns_.at(fd).c.read_ahead.empty();
      drop(fd, &Counts::timed_out, sent_some ? 408 : 0, "the request did not arrive in time");
    }
  }
}

void HeadReactor::take_incoming() {
  std::vector<ParkedConnection> in;
  {
    std::lock_guard<std::mutex> lk(mu_);
    in.swap(incoming_);
  }
  for (auto& c : in) add(std::move(c));
}

void HeadReactor::add(ParkedConnection c) {
  const int fd = c.fd;
  Entry& e = conns_[fd];
  e = Entry{};
  e.c = std::move(c);
  e.expiry = e.c.deadline;
  refresh_expiry(e, Clock::now());
  if (complete(e)) return hand(fd);  // a pipelined request, read ahead with the one before
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP;
  ev.data.fd = fd;
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0)
    return drop(fd, nullptr, 503, "cannot watch the connection");
  if (conns_.size() > lim_.max_pending)
    drop(by_expiry_.begin()->second, &Counts::evicted, 503, "too many connections are waiting for their request");
}

void HeadReactor::refresh_expiry(Entry& e, Clock::time_point last_byte) {
  const int fd = e.c.fd;
  by_expiry_.erase({e.expiry, fd});
  e.expiry = std::min(e.c.deadline, last_byte + seconds(lim_.idle_timeout_s));
  by_expiry_.insert({e.expiry, fd});
}

bool HeadReactor::complete(Entry& e) const {
  if (e.need == 0) {
    const size_t end = request_head_end(e.c.read_ahead);
    if (end == std::string::npos) return false;
    e.need = end + body_to_prefetch(e.c.read_ahead.substr(0, end), lim_.max_prefetch_bytes);
  }
  return e.c.read_ahead.size() >= e.need;
}

void HeadReactor::read_from(int fd) {
  auto it = conns_.find(fd);
  if (it == conns_.end()) return;
  Entry& e = it->second;
  char buf[4096];
  bool got = false;
  for (;;) {
    const ssize_t r = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (r > 0) {
      e.c.read_ahead.append(buf, size_t(r));
      got = true;
      if (e.c.read_ahead.size() > (e.need ? e.need : lim_.max_head_bytes)) break;
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    // The peer closed (0) or the connection failed: whatever it sent is no request worth answering.
    return drop(fd, &Counts::closed_by_peer, 0, "");
  }
  if (complete(e)) return hand(fd);
  if (e.need == 0 && e.c.read_ahead.size() > lim_.max_head_bytes) {
    return drop(fd, &Counts::head_too_large, 431, "the request head is too large");
  }
  if (got) refresh_expiry(e, Clock::now());
}

void HeadReactor::drop(int fd, int64_t Counts::*why, int status, const char* message) {
  auto it = conns_.find(fd);
  if (it == conns_.end()) return;
  by_expiry_.erase({it->second.expiry, fd});
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  conns_.erase(it);
  {
    std::lock_guard<std::mutex> lk(mu_);  // counted before the peer can see the close
    --pending_;
    if (why) ++(counts_.*why);
  }
  answer_and_close(fd, status, message);
}

void HeadReactor::hand(int fd) {
  auto it = conns_.find(fd);
  by_expiry_.erase({it->second.expiry, fd});
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);  // ENOENT for a pipelined request never added: harmless
  ParkedConnection c = std::move(it->second.c);
  conns_.erase(it);
  {
    std::lock_guard<std::mutex> lk(mu_);
    ++counts_.handed;
    --pending_;
  }
  ready_(std::move(c));
}

// ---------------------------------------------------------------------------------------------------------------
// The request on a connection thread

namespace {
// httplib reads the request through this: first the bytes the reactor read ahead, then the socket, each wait at most
// the read timeout and never past the request's deadline. It remembers whether the answer said "Connection: close".
class RequestStream final : public httplib::Stream {
 public:
  RequestStream(ParkedConnection& c, double read_timeout_s, double write_timeout_s)
      : c_(c), read_timeout_(seconds(read_timeout_s)), write_timeout_(seconds(write_timeout_s)) {}

  bool is_readable() const override { return pos_ < c_.read_ahead.size() || wait(POLLIN, read_until()); }
  bool is_writable() const override { return wait(POLLOUT, Clock::now() + write_timeout_); }

  ssize_t read(char* ptr, size_t size) override {
    if (pos_ == c_.read_ahead.size()) {
      c_.read_ahead.clear();
      pos_ = 0;
      if (!wait(POLLIN, read_until())) return -1;
      char buf[4096];
      ssize_t r;
      do r = ::recv(c_.fd, buf, sizeof buf, 0);
      while (r < 0 && errno == EINTR);
      if (r <= 0) return r;
      c_.read_ahead.assign(buf, size_t(r));
    }
    const size_t n = std::min(size, c_.read_ahead.size() - pos_);
    std::memcpy(ptr, c_.read_ahead.data() + pos_, n);
    pos_ += n;
    return ssize_t(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (head_.size() < 8192) head_.append(ptr, std::min(size, 8192 - head_.size()));
    const auto until = Clock::now() + write_timeout_;
    for (;;) {
      if (!wait(POLLOUT, until)) return -1;
      const ssize_t r = ::send(c_.fd, ptr, size, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (r >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) return r;
    }
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override { address(true, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { address(false, ip, port); }
  socket_t socket() const override { return c_.fd; }

  // The unread bytes move to the front of read_ahead (a pipelined next request).
  void keep_unread() {
    c_.read_ahead.erase(0, pos_);
    pos_ = 0;
  }
  // The answer's head (what was written up to its blank line) holds "Connection: close".
  bool answer_says_close() const {
    std::string h = head_.substr(0, std::min(head_.size(), head_.find("\r\n\r\n")));
    std::transform(h.begin(), h.end(), h.begin(), [](unsigned char ch) { return char(std::tolower(ch)); });
    return h.find("\r\nconnection: close") != std::string::npos;
  }

 private:
  Clock::time_point read_until() const { return std::min(c_.deadline, Clock::now() + read_timeout_); }
  bool wait(short what, Clock::time_point until) const {
    pollfd p{c_.fd, what, 0};
    for (;;) {
      const int r = ::poll(&p, 1, millis_until(until));
      if (r > 0) return (p.revents & (what | POLLHUP | POLLERR)) != 0;
      if (r == 0 || errno != EINTR) return false;
    }
  }
  void address(bool remote, std::string& ip, int& port) const {
    sockaddr_storage a{};
    socklen_t len = sizeof a;
    const int rc = remote ? ::getpeername(c_.fd, reinterpret_cast<sockaddr*>(&a), &len)
                          : ::getsockname(c_.fd, reinterpret_cast<sockaddr*>(&a), &len);
    char host[NI_MAXHOST], serv[NI_MAXSERV];
    if (rc != 0 || ::getnameinfo(reinterpret_cast<sockaddr*>(&a), len, host, sizeof host, serv, sizeof serv,
                                 NI_NUMERICHOST | NI_NUMERICSERV) != 0)
      return;
    ip = host;
    port = std::atoi(serv);
  }

  ParkedConnection& c_;
  const Clock::duration read_timeout_, write_timeout_;
  size_t pos_ = 0;
  std::string head_;  // the first bytes of the answer
};

// httplib's listen loop hands each accepted socket to its task queue, whose task calls process_and_close_socket:
// here the queue runs the task at once on the listen thread and the override parks the socket, so no thread waits.
class InlineQueue final : public httplib::TaskQueue {
 public:
  void enqueue(std::function<void()> fn) override { fn(); }
  void shutdown() override {}
};

class ParkingServer final : public httplib::Server {
 public:
  explicit ParkingServer(std::function<void(int)> on_accept) : on_accept_(std::move(on_accept)) {
    new_task_queue = [] { return new InlineQueue; };
  }
  bool serve(httplib::Stream& strm, bool close_connection, bool& connection_closed) {
    return process_request(strm, close_connection, connection_closed, nullptr);
  }
  size_t keep_alive_max() const { return keep_alive_max_count_; }

 private:
  bool process_and_close_socket(socket_t sock) override {
    // httplib writes an answer's head and body in two sends: with Nagle on, the body waits for the client's delayed
    // ACK of the head (about 40 ms on Linux), which was most of a single client's latency.
    int one = 1;
    ::setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    on_accept_(sock);
    return true;
  }
  std::function<void(int)> on_accept_;
};
}  // namespace

std::unique_ptr<httplib::Server> make_parking_server(std::function<void(int fd)> on_accept) {
  return std::make_unique<ParkingServer>(std::move(on_accept));
}

bool serve_parked_request(httplib::Server& srv, ParkedConnection& c, double read_timeout_s, double write_timeout_s) {
  auto& server = static_cast<ParkingServer&>(srv);
  RequestStream strm(c, read_timeout_s, write_timeout_s);
  const bool last = size_t(c.answered) + 1 >= server.keep_alive_max();
  bool connection_closed = false;
  const bool ok = server.serve(strm, last, connection_closed);
  ++c.answered;
  strm.keep_unread();
  return ok && !last && !connection_closed && !strm.answer_says_close() && srv.is_running();
}

}  // namespace daei
