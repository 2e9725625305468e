// Work on a list of items (the texts of an evaluation split) split over the ranks, and the per-item results gathered
// back in the list's order. The split is in whole blocks of a fixed size, dealt to the ranks in contiguous runs, so
// a computation done a block at a time (a batch of generation, a chunk of queries) sees the same blocks, and gives
// the same numbers, on every world size; only which rank computes a block changes.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace daei {

class Communicator;

// Items [begin, end) of a list.
struct ItemRange {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
};

// Rank `rank`'s share of n items in blocks of `block` items (the last block may be shorter): blocks
// [rank·nb/W, (rank+1)·nb/W) of the nb blocks. Rank order is item order; a rank may get none (nb < W).
ItemRange block_share(int64_t n, int64_t block, int rank, int world);
// This rank's share under comm.
ItemRange block_share(int64_t n, int64_t block, const Communicator& comm);
// The blocks of a range, each [begin, begin + block) cut at range.end.
std::vector<ItemRange> blocks_of(const ItemRange& range, int64_t block);

// Every rank's part of a list split by block_share, concatenated in rank order (= item order) on every rank. A
// collective: every rank calls it, with an empty part if it has none. Values travel as bytes: exact.
std::vector<std::string> gather_in_order(Communicator& comm, const std::vector<std::string>& mine);
std::vector<double> gather_in_order(Communicator& comm, const std::vector<double>& mine);
std::vector<int64_t> gather_in_order(Communicator& comm, const std::vector<int64_t>& mine);

}  // namespace daei
