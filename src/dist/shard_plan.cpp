#include "dist/shard_plan.h"

#include <numeric>

#include "core/error.h"
#include "core/rng.h"

namespace daei {

std::vector<int64_t> epoch_permutation(int64_t n_items, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> p(n_items);
  std::iota(p.begin(), p.end(), 0);
  SplitMix rng(splitmix64(seed) ^ splitmix64(0xE90C0000ULL + static_cast<uint64_t>(epoch)));
  for (int64_t i = n_items - 1; i > 0; --i) std::swap(p[i], p[rng.below(static_cast<uint64_t>(i) + 1)]);
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
  const auto perm = epoch_permutation(n_items, seed, epoch);
  const int64_t steps = steps_per_epoch(n_items, world, local_batch, /*drop_last=*/false);
  const int64_t global = static_cast<int64_t>(world) * local_batch;
  std::vector<int64_t> out;
  out.reserve(steps * local_batch);
  for (int64_t s = 0; s < steps; ++s)
    for (int64_t j = 0; j < local_batch; ++j) {
      int64_t pos = s * global + rank * local_batch + j;
      out.push_back(pos < n_items ? perm[pos] : -1);
    }
  return out;
}

}  // namespace daei
