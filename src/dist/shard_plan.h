// Which items each rank reads in an epoch. A pure function: the same for every world size's view of the data
// and independent of how the data was written.
//
// The epoch's order is a seeded permutation of [0, n_items). It is cut into global batches of
// world * local_batch items; rank r takes the r-th slice of local_batch items of each global batch. So N ranks
// with local batch B/N see exactly the global batches that 1 rank with batch B sees. Every rank gets the same number
// of steps: ceil(n / (world * local_batch)); positions past the end are -1 (padding, to be masked or dropped).
#pragma once
#include <cstdint>
#include <vector>

namespace daei {

std::vector<int64_t> epoch_permutation(int64_t n_items, uint64_t seed, int64_t epoch);

std::vector<int64_t> shard_plan(int64_t n_items, int world, int rank, int64_t epoch, uint64_t seed,
                                int64_t local_batch = 1);

// Steps per epoch when the last, partial global batch is dropped (training) or kept (evaluation).
int64_t steps_per_epoch(int64_t n_items, int world, int64_t local_batch, bool drop_last);

}  // namespace daei
