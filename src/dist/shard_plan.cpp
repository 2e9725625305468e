#include "dist/shard_plan.h"

#include "core/error.h"
#include "core/rng.h"

namespace daei {

EpochOrder::EpochOrder(int64_t n_items, uint64_t seed, int64_t epoch) : n_(n_items) {
  DAEI_CHECK(n_items >= 0, "EpochOrder: {} items", n_items);
  int bits = 2;  // a domain of at least 4, split in two equal halves
  while ((int64_t(1) << bits) < n_items) bits += 2;
  half_bits_ = bits / 2;
  half_mask_ = (uint64_t(1) << half_bits_) - 1;
  uint64_t k = splitmix64(seed) ^ splitmix64(0xE90C0000ULL + static_cast<uint64_t>(epoch));
  for (auto& key : keys_) key = k = splitmix64(k);
}

uint64_t EpochOrder::permute_domain(uint64_t x) const {
  uint64_t left = x >> half_bits_, right = x & half_mask_;
  for (uint64_t key : keys_) {
    const uint64_t next = left ^ (splitmix64(key ^ right) & half_mask_);
    left = right;
    right = next;
  }
  return (left << half_bits_) | right;
}

int64_t EpochOrder::operator[](int64_t pos) const {
  DAEI_CHECK(pos >= 0 && pos < n_, "EpochOrder: position {} outside [0, {})", pos, n_);
  // Cycle walking: the network permutes the whole domain, so following it from pos until it lands inside [0, n)
  // visits pos's cycle and gives a permutation of [0, n).
  uint64_t x = static_cast<uint64_t>(pos);
  do x = permute_domain(x); while (x >= static_cast<uint64_t>(n_));
  return static_cast<int64_t>(x);
}

std::vector<int64_t> step_rows(const EpochOrder& order, int world, int rank, int64_t step, int64_t local_batch) {
  DAEI_CHECK(world >= 1 && rank >= 0 && rank < world && local_batch >= 1 && step >= 0,
             "step_rows: bad arguments (world={}, rank={}, local_batch={}, step={})", world, rank, local_batch, step);
  std::vector<int64_t> out(local_batch);
  const int64_t first = (step * world + rank) * local_batch;
  for (int64_t j = 0; j < local_batch; ++j) out[j] = first + j < order.size() ? order[first + j] : -1;
  return out;
}

std::vector<int64_t> epoch_permutation(int64_t n_items, uint64_t seed, int64_t epoch) {
  const EpochOrder order(n_items, seed, epoch);
  std::vector<int64_t> p(n_items);
  for (int64_t i = 0; i < n_items; ++i) p[i] = order[i];
  return p;
}

int64_t steps_per_epoch(int64_t n_items, int world, int64_t local_batch, bool drop_last) {
  const int64_t global = static_cast<int64_t>(world) * local_batch;
  return drop_last ? n_items / global : (n_items + global - 1) / global;
}

std::vector<int64_t> shard_plan(int64_t n_items, int world, int rank, int64_t epoch, uint64_t seed,
                                int64_t local_batch) {
  DAEI_CHECK(world >= 1 && rank >= 0 && rank < world && local_batch >= 1 && n_items >= 0,
             "shard_plan: bad arguments (n={}, world={}, rank={}, local_batch={})", n_items, world, rank, local_batch);
  const EpochOrder order(n_items, seed, epoch);
  const int64_t steps = steps_per_epoch(n_items, world, local_batch, /*drop_last=*/false);
  std::vector<int64_t> out;
  out.reserve(steps * local_batch);
  for (int64_t s = 0; s < steps; ++s) {
    auto rows = step_rows(order, world, rank, s, local_batch);
    out.insert(out.end(), rows.begin(), rows.end());
  }
  return out;
}

}  // namespace daei
