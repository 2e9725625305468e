// Which items each rank reads in an epoch. A pure function: the same for every world size's view of the data
// and independent of how the data was written.
//
// The epoch's order is a seeded permutation of [0, n_items). It is cut into global batches of
// world * local_batch items; rank r takes the r-th slice of local_batch items of each global batch. So N ranks
// with local batch B/N see exactly the global batches that 1 rank with batch B sees. Every rank gets the same number
// of steps: ceil(n / (world * local_batch)); positions past the end are -1 (padding, to be masked or dropped).
//
// The permutation is evaluated one position at a time (EpochOrder), never materialised: a step's rows cost
// O(local_batch) time and memory whatever the corpus size (issue 16: at 7 M rows a stored order was 8 B a row).
#pragma once
#include <cstdint>
#include <vector>

namespace daei {

// A keyed pseudo-random permutation of [0, n): a balanced Feistel network on the smallest even-bit power of two
// ≥ n (at most 4n), with cycle walking back into [0, n) (fewer than 4 rounds of the network per position on
// average). O(1) memory; order[pos] for any pos in [0, n).
class EpochOrder {
 public:
  EpochOrder(int64_t n_items, uint64_t seed, int64_t epoch);
  int64_t operator[](int64_t pos) const;
  int64_t size() const { return n_; }

 private:
  static constexpr int kRounds = 6;
  uint64_t permute_domain(uint64_t x) const;
  int64_t n_;
  int half_bits_;
  uint64_t half_mask_;
  uint64_t keys_[kRounds];
};

// The local_batch items rank `rank` reads at step `step` of the epoch order (-1 past the end).
std::vector<int64_t> step_rows(const EpochOrder& order, int world, int rank, int64_t step, int64_t local_batch);

// The whole order, materialised (tests and tools; training uses EpochOrder).
std::vector<int64_t> epoch_permutation(int64_t n_items, uint64_t seed, int64_t epoch);

// A rank's rows for the whole epoch, step after step (tests and tools; training uses step_rows).
std::vector<int64_t> shard_plan(int64_t n_items, int world, int rank, int64_t epoch, uint64_t seed,
                                int64_t local_batch = 1);

// Steps per epoch when the last, partial global batch is dropped (training) or kept (evaluation).
int64_t steps_per_epoch(int64_t n_items, int world, int64_t local_batch, bool drop_last);

}  // namespace daei
