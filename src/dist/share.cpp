#include "dist/share.h"

#include <cstring>
#include <type_traits>

#include "core/error.h"
#include "dist/communicator.h"

namespace daei {

ItemRange block_share(int64_t n, int64_t block, int rank, int world) {
  DAEI_CHECK(n >= 0 && block > 0 && world > 0 && rank >= 0 && rank < world,
             "block_share: n {} >= 0, block {} > 0 and rank {} in [0, world {}) required", n, block, rank, world);
  const int64_t nb = (n + block - 1) / block;
  const int64_t b0 = nb * rank / world, b1 = nb * (rank + 1) / world;
  return {std::min(n, b0 * block), std::min(n, b1 * block)};
}

ItemRange block_share(int64_t n, int64_t block, const Communicator& comm) {
  return block_share(n, block, comm.rank(), comm.size());
}

std::vector<ItemRange> blocks_of(const ItemRange& range, int64_t block) {
  DAEI_CHECK(block > 0, "blocks_of: block must be > 0, got {}", block);
  std::vector<ItemRange> out;
  for (int64_t b = range.begin; b < range.end; b += block) out.push_back({b, std::min(range.end, b + block)});
  return out;
}

namespace {

// Strings: a uint64 length before each; numbers: their bytes as they are in memory (every rank runs the same build).
void put(std::string& out, const std::string& s) {
  const uint64_t len = s.size();
  out.append(reinterpret_cast<const char*>(&len), sizeof len);
  out += s;
}
template <class T>
void put(std::string& out, const T& v) {
  static_assert(std::is_trivially_copyable_v<T>);
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

void take(const std::string& in, size_t& pos, std::string& s) {
  uint64_t len = 0;
  DAEI_ASSERT(pos + sizeof len <= in.size(), "gather_in_order: a truncated part");
  std::memcpy(&len, in.data() + pos, sizeof len);
  pos += sizeof len;
  DAEI_ASSERT(pos + len <= in.size(), "gather_in_order: a truncated string");
  s.assign(in, pos, len);
  pos += len;
}
template <class T>
void take(const std::string& in, size_t& pos, T& v) {
  DAEI_ASSERT(pos + sizeof v <= in.size(), "gather_in_order: a truncated part");
  std::memcpy(&v, in.data() + pos, sizeof v);
  pos += sizeof v;
}

template <class T>
std::vector<T> gather(Communicator& comm, const std::vector<T>& mine) {
  if (comm.size() == 1) return mine;
  std::string part;
  for (const auto& v : mine) put(part, v);
  std::vector<T> all;
  for (const std::string& p : comm.allgather(part)) {
    for (size_t pos = 0; pos < p.size();) {
      T v{};
      take(p, pos, v);
      all.push_back(std::move(v));
    }
  }
  return all;
}

}  // namespace

std::vector<std::string> gather_in_order(Communicator& comm, const std::vector<std::string>& mine) {
  return gather(comm, mine);
}
std::vector<double> gather_in_order(Communicator& comm, const std::vector<double>& mine) { return gather(comm, mine); }
std::vector<int64_t> gather_in_order(Communicator& comm, const std::vector<int64_t>& mine) {
  return gather(comm, mine);
}

}  // namespace daei
