// serve-embedder's connections before their request head is in (model/http_connections): the reactor's rules on
// socket pairs, then the server under slow clients, pipelined requests and a body that trickles past its deadline.
#include <gtest/gtest.h>
#include "model/release/httplib_config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>
#include <torch/torch.h>

#include "model/release/http_connections.h"
#include "model/release/http_embedder.h"

using namespace daei;
using Clock = std::chrono::steady_clock;

namespace {

// Everything the other end sends until it closes or `secs` pass.
std::string read_until_closed(int fd, double secs) {
  std::string out;
  const auto until = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(secs));
  for (;;) {
    const int ms = int(std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count());
    if (ms <= 0) return out;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, ms) <= 0) return out;
    char buf[4096];
    const ssize_t r = ::recv(fd, buf, sizeof buf, 0);
    if (r <= 0) return out;
    out.append(buf, size_t(r));
  }
}

void send_all(int fd, const std::string& s) { ASSERT_EQ(::send(fd, s.data(), s.size(), MSG_NOSIGNAL), ssize_t(s.size())); }

// The reactor under test, with what it handed over.
struct Harness {
  std::mutex mu;
  std::vector<ParkedConnection> ready;
  HeadReactor reactor;
  explicit Harness(ReactorLimits lim)
      : reactor(lim, [this](ParkedConnection c) {
          std::lock_guard<std::mutex> lk(mu);
          ready.push_back(std::move(c));
        }) {}
  ~Harness() {
    reactor.stop();
    for (auto& c : ready) ::close(c.fd);
  }
  // A connected pair: the server end parked, the client end returned.
  int connect() {
    int sv[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    reactor.park(ParkedConnection{sv[0], {}, 0, {}});
    return sv[1];
  }
  size_t handed() {
    std::lock_guard<std::mutex> lk(mu);
    return ready.size();
  }
  bool wait_handed(size_t n, double secs) {
    const auto until = Clock::now() + std::chrono::milliseconds(int(secs * 1000));
    while (handed() < n && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return handed() >= n;
  }
};

ServerOptions small_server() {
  ServerOptions s;
  s.port = 0;
  s.max_batch = 16;
  s.max_body_bytes = 4096;
  s.max_connections = 2;  // two connection threads: any client that held one would starve the rest
  return s;
}

int dial(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  return fd;
}

at::Tensor ones(const std::vector<std::string>& t) { return torch::ones({int64_t(t.size()), 3}); }

const std::string kBody = R"({"input": ["a b"]})";
std::string post(bool close) {
  return "POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(kBody.size()) + (close ? "\r\nConnection: close" : "") + "\r\n\r\n" + kBody;
}

}  // namespace

TEST(HttpConnections, RequestHeadEndsAtTheFirstBlankLine) {
  EXPECT_EQ(request_head_end(""), std::string::npos);
  EXPECT_EQ(request_head_end("GET / HTTP/1.1\r\nHost: x\r\n"), std::string::npos);
  EXPECT_EQ(request_head_end("GET / HTTP/1.1\r\nHost: x\r\n\r"), std::string::npos);
  EXPECT_EQ(request_head_end("GET / HTTP/1.1\r\nHost: x\r\n\r\nbody"), 27u);
  EXPECT_EQ(request_head_end("GET / HTTP/1.1\nHost: x\n\nbody"), 24u);
  EXPECT_EQ(request_head_end("GET / HTTP/1.1\r\n\r\nA\r\n\r\n"), 18u);  // the first blank line, not the last
  EXPECT_EQ(request_head_end("GET / HTTP/1.1\r\nX: a\n\r\n"), 23u);     // mixed endings, as httplib reads them
}

TEST(HttpConnections, AHeadSentByteByByteIsHandedOverOnlyWhenComplete) {
  ReactorLimits lim;
  Harness h(lim);
  const int fd = h.connect();
  const std::string head = "POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\n";
  for (size_t i = 0; i + 1 < head.size(); ++i) send_all(fd, head.substr(i, 1));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(h.handed(), 0u);
  EXPECT_EQ(h.reactor.pending(), 1u);
  send_all(fd, head.substr(head.size() - 1) + "abc");
  ASSERT_TRUE(h.wait_handed(1, 2.0));
  EXPECT_EQ(h.ready[0].read_ahead, head + "abc");  // every byte, the body's start included, in order
  EXPECT_EQ(h.reactor.pending(), 0u);
  EXPECT_EQ(h.reactor.counts().handed, 1);
  ::close(fd);
}

TEST(HttpConnections, AHeadNotInByTheDeadlineGets408AndASilentConnectionIsClosed) {
  ReactorLimits lim;
  lim.request_timeout_s = 0.4;
  lim.idle_timeout_s = 0.25;
  Harness h(lim);
  const int slow = h.connect(), silent = h.connect();
  const auto t0 = Clock::now();
  std::thread trickle([&] {  // a byte every 0.1 s: never silent for the idle timeout, never a whole head
    for (char ch : std::string("POST /v1/embeddings HTTP/1.1\r\nX-Pad: aaaa"))
      if (::send(slow, &ch, 1, MSG_NOSIGNAL) != 1 || Clock::now() - t0 > std::chrono::seconds(2)) break;
      else std::this_thread::sleep_for(std::chrono::milliseconds(100));
  });
  const std::string answer = read_until_closed(slow, 3.0);
  const double took = std::chrono::duration<double>(Clock::now() - t0).count();
  trickle.join();
  EXPECT_EQ(answer.rfind("HTTP/1.1 408 ", 0), 0u) << answer;
  EXPECT_NE(answer.find("Connection: close"), std::string::npos);
  EXPECT_GE(took, 0.35);
  EXPECT_LT(took, 1.5);
  EXPECT_EQ(read_until_closed(silent, 1.0), "");  // closed, and nothing said to a client that said nothing
  EXPECT_EQ(h.reactor.counts().timed_out, 2);
  EXPECT_EQ(h.handed(), 0u);
  ::close(slow);
  ::close(silent);
}

TEST(HttpConnections, AnOversizeHeadGets431AndTheOldestWaiterMakesRoomWith503) {
  ReactorLimits lim;
  lim.max_head_bytes = 100;
  lim.max_pending = 2;
  Harness h(lim);
  const int big = h.connect();
  send_all(big, "GET / HTTP/1.1\r\nX: " + std::string(200, 'a'));
  EXPECT_EQ(read_until_closed(big, 2.0).rfind("HTTP/1.1 431 ", 0), 0u);
  EXPECT_EQ(h.reactor.counts().head_too_large, 1);
  const int first = h.connect();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const int second = h.connect();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const int third = h.connect();
  EXPECT_EQ(read_until_closed(first, 2.0).rfind("HTTP/1.1 503 ", 0), 0u);
  EXPECT_EQ(h.reactor.counts().evicted, 1);
  EXPECT_EQ(h.reactor.pending(), 2u);
  send_all(third, "GET / HTTP/1.1\r\n\r\n");  // the newest still gets through
  ASSERT_TRUE(h.wait_handed(1, 2.0));
  for (int fd : {big, first, second, third}) ::close(fd);
}

TEST(HttpConnections, StopClosesWaitingConnectionsAndLaterParksAreClosed) {
  ReactorLimits lim;
  auto h = std::make_unique<Harness>(lim);
  const int waiting = h->connect();
  send_all(waiting, "GET / HT");
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  h->reactor.stop();
  EXPECT_EQ(read_until_closed(waiting, 1.0), "");
  const int late = h->connect();
  EXPECT_EQ(read_until_closed(late, 1.0), "");
  EXPECT_EQ(h->reactor.pending(), 0u);
  ::close(waiting);
  ::close(late);
}

// The server: 100 clients that never finish their requests do not hold its two connection threads.
TEST(HttpConnections, ValidRequestsAreAnsweredWhileManySlowClientsWait) {
  EmbeddingServer srv(ones, small_server());
  srv.start();
  std::vector<int> slow;
  for (int i = 0; i < 100; ++i) {
    slow.push_back(dial(srv.port()));
    if (i % 2 == 0)  // half never finish their heads, half never finish their bodies
      send_all(slow.back(), "POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nX-Pad: ");
    else
      send_all(slow.back(), "POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Length: 500\r\n\r\n{\"in");
  }
  httplib::Client c("127.0.0.1", srv.port());
  c.set_read_timeout(3, 0);
  const auto t0 = Clock::now();
  for (int i = 0; i < 10; ++i) {
    auto r = c.Post("/v1/embeddings", kBody, "application/json");
    ASSERT_TRUE(r) << "request " << i << " got no answer";
    EXPECT_EQ(r->status, 200);
  }
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 2.0);
  EXPECT_EQ(srv.served(), 10);
  for (int fd : slow) ::close(fd);
}

TEST(HttpConnections, PipelinedRequestsOnOneConnectionAreAnsweredInOrder) {
  EmbeddingServer srv(ones, small_server());
  srv.start();
  const int fd = dial(srv.port());
  send_all(fd, post(false) + post(false) + post(true));  // one write: the second and third wait in read_ahead
  const std::string out = read_until_closed(fd, 5.0);
  size_t answers = 0;
  for (size_t at = out.find("HTTP/1.1 200 "); at != std::string::npos; at = out.find("HTTP/1.1 200 ", at + 1)) ++answers;
  EXPECT_EQ(answers, 3u) << out;
  EXPECT_EQ(srv.served(), 3);
  ::close(fd);
}

TEST(HttpConnections, TheBodyToAwaitIsAPlainContentLengthUpToTheCap) {
  const std::string line = "POST / HTTP/1.1\r\n";
  EXPECT_EQ(body_to_prefetch(line + "Content-Length: 12\r\n\r\n", 100), 12u);
  EXPECT_EQ(body_to_prefetch(line + "content-LENGTH:7\r\n\r\n", 100), 7u);
  EXPECT_EQ(body_to_prefetch(line + "Host: x\r\nContent-Length: 0\r\n\r\n", 100), 0u);
  EXPECT_EQ(body_to_prefetch(line + "Content-Length: 101\r\n\r\n", 100), 0u);  // over the cap: the thread reads it
  EXPECT_EQ(body_to_prefetch(line + "Content-Length: 99999999999999999999999\r\n\r\n", 100), 0u);
  EXPECT_EQ(body_to_prefetch(line + "Content-Length: 12x\r\n\r\n", 100), 0u);
  EXPECT_EQ(body_to_prefetch(line + "Content-Length: -1\r\n\r\n", 100), 0u);
  EXPECT_EQ(body_to_prefetch(line + "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", 100), 0u);
  EXPECT_EQ(body_to_prefetch(line + "X-Content-Length: 5\r\n\r\n", 100), 0u);
  EXPECT_EQ(body_to_prefetch(line + "\r\n", 100), 0u);
}

TEST(HttpConnections, ABodyOfKnownLengthIsAwaitedBeforeTheHandOver) {
  ReactorLimits lim;
  lim.max_prefetch_bytes = 10;
  Harness h(lim);
  const int small = h.connect(), large = h.connect();
  send_all(small, "POST / HTTP/1.1\r\nContent-Length: 6\r\n\r\nabc");
  send_all(large, "POST / HTTP/1.1\r\nContent-Length: 11\r\n\r\nabc");
  ASSERT_TRUE(h.wait_handed(1, 2.0));  // the larger one goes to a thread as soon as its head is in
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(h.handed(), 1u);
  EXPECT_EQ(h.ready[0].read_ahead, "POST / HTTP/1.1\r\nContent-Length: 11\r\n\r\nabc");
  send_all(small, "def");
  ASSERT_TRUE(h.wait_handed(2, 2.0));
  EXPECT_EQ(h.ready[1].read_ahead, "POST / HTTP/1.1\r\nContent-Length: 6\r\n\r\nabcdef");
  ::close(small);
  ::close(large);
}

// A body that trickles in, a byte every 0.1 s (under the 5 s read timeout), for longer than request_timeout_s.
static std::string trickled_body_answer(const std::string& head, double* took) {
  ServerOptions o = small_server();
  o.request_timeout_s = 0.5;
  EmbeddingServer srv(ones, o);
  srv.start();
  const int fd = dial(srv.port());
  const auto t0 = Clock::now();
  send_all(fd, head);
  std::atomic<bool> done{false};
  std::thread trickle([&] {
    for (int i = 0; i < 30 && !done; ++i) {
      if (::send(fd, "1", 1, MSG_NOSIGNAL) != 1) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  const std::string out = read_until_closed(fd, 4.0);
  *took = std::chrono::duration<double>(Clock::now() - t0).count();
  done = true;
  trickle.join();
  EXPECT_EQ(srv.served(), 0);
  ::close(fd);
  return out;
}

TEST(HttpConnections, ABodyThatTricklesPastTheRequestDeadlineIsCutOff) {
  double took = 0;
  // Content-Length under the prefetch cap: awaited in the reactor, which answers 408 at the deadline.
  std::string out = trickled_body_answer("POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n", &took);
  EXPECT_EQ(out.rfind("HTTP/1.1 408 ", 0), 0u) << out;
  EXPECT_GE(took, 0.45);
  EXPECT_LT(took, 2.0);
  // Chunked (one chunk of 0x100 bytes): read on a connection thread, cut off at the same deadline (400) and closed.
  out = trickled_body_answer("POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n100\r\n", &took);
  EXPECT_EQ(out.rfind("HTTP/1.1 400 ", 0), 0u) << out;
  EXPECT_NE(out.find("Connection: close"), std::string::npos);
  EXPECT_GE(took, 0.45);
  EXPECT_LT(took, 2.0);
}
