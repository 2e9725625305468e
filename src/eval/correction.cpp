#include "eval/correction.h"

#include <torch/torch.h>

#include <algorithm>
#include <numeric>
#include <unordered_map>
#include <unordered_set>

#include "core/error.h"
#include "core/log.h"
#include "dist/communicator.h"
#include "dist/share.h"
#include "model/attack/corrector.h"
#include "model/release/embedder.h"
#include "model/net/generate.h"
#include "model/text/token_batch.h"
#include "model/text/tokenizer_spm.h"

namespace daei {

int64_t CorrectionResult::total_queries() const {
  return std::accumulate(queries_per_text.begin(), queries_per_text.end(), int64_t(0));
}

bool correction_should_stop(double prev_mean, double cur_mean, int64_t steps_run, const CorrectionOptions& opt) {
  if (steps_run >= opt.max_steps) return true;
  if (!opt.early_stop || steps_run < 2) return false;
  const double gain = cur_mean - prev_mean;
  return !(gain >= opt.min_gain) || gain < 0;  // NaN stops too
}

int64_t early_stop_round(const std::vector<double>& round_mean_cos, const CorrectionOptions& opt) {
  const int64_t last = static_cast<int64_t>(round_mean_cos.size()) - 1;
  for (int64_t t = 1; t <= last; ++t)
    if (correction_should_stop(round_mean_cos[t - 1], round_mean_cos[t], t, opt)) return t;
  return std::max<int64_t>(last, 0);
}

std::vector<int64_t> top_distinct(const std::vector<std::string>& texts, const std::vector<double>& scores,
                                  int64_t s) {
  DAEI_CHECK(texts.size() == scores.size(), "top_distinct: {} texts but {} scores", texts.size(), scores.size());
  std::vector<int64_t> order(texts.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return scores[a] > scores[b]; });
  std::vector<int64_t> out;
  std::unordered_set<std::string> seen;
  for (int64_t i : order) {
    if (static_cast<int64_t>(out.size()) >= s) break;
    if (seen.insert(texts[i]).second) out.push_back(i);
  }
  return out;
}

std::string correction_query_key(const std::string& text_id, int64_t round, int64_t candidate) {
  return "correct/" + text_id + "/r" + std::to_string(round) + "/c" + std::to_string(candidate);
}

at::Tensor query_chunked(const QueryFn& query, const std::vector<std::string>& texts,
                         const std::vector<std::string>& keys, int64_t chunk) {
  DAEI_CHECK(chunk > 0, "correction: embed_chunk must be > 0");
  DAEI_CHECK(texts.size() == keys.size(), "query: {} texts but {} keys", texts.size(), keys.size());
  const int64_t n = texts.size();
  std::vector<at::Tensor> parts;
  for (int64_t b = 0; b < n; b += chunk) {
    const int64_t e = std::min(n, b + chunk);
    std::vector<std::string> t(texts.begin() + b, texts.begin() + e), k(keys.begin() + b, keys.begin() + e);
    at::Tensor y = query(t, k);
    DAEI_CHECK(y.dim() == 2 && y.size(0) == e - b, "the black box returned ({}) for {} texts",
               fmt::format("{}", fmt::join(y.sizes(), ", ")), e - b);
    parts.push_back(y.to(torch::kCPU, torch::kFloat32));
  }
  if (parts.empty()) return torch::empty({0, 0}, torch::kFloat32);
  return parts.size() == 1 ? parts[0] : torch::cat(parts, 0);
}

at::Tensor query_averaged(const QueryFn& query, const std::vector<std::string>& texts,
                          const std::vector<std::string>& keys, int64_t k, int64_t chunk) {
  DAEI_CHECK(k >= 1, "correction: queries_per_candidate must be >= 1, got {}", k);
  return mean_of_queries([&](const auto& t, const auto& q) { return query_chunked(query, t, q, chunk * k); }, texts,
                         keys, k);
}

namespace {

at::Tensor denoise_chunked(const DenoiseFn& denoise, const at::Tensor& x, int64_t chunk) {
  std::vector<at::Tensor> parts;
  for (int64_t b = 0; b < x.size(0); b += chunk) {
    auto part = x.slice(0, b, std::min(x.size(0), b + chunk));
    at::Tensor d = denoise(part);
    DAEI_CHECK(d.sizes() == part.sizes(), "denoise returned ({}) for ({})", fmt::format("{}", fmt::join(d.sizes(), ", ")),
               fmt::format("{}", fmt::join(part.sizes(), ", ")));
    parts.push_back(d.to(torch::kFloat32));
  }
  return torch::cat(parts, 0);
}

// What an attacker knows about one candidate text of one input: its denoised embedding and its score.
struct Seen {
  at::Tensor e;  // (d) on the corrector's device, float32
  double cos = 0;
};

struct TextState {
  std::unordered_map<std::string, Seen> seen;  // every text queried for this input
  // The ids each text was generated as (a vec2text corrector reads them; the first generation of a text kept).
  std::unordered_map<std::string, std::vector<int64_t>> ids;
  std::vector<std::string> beams;              // kept sequences (distinct), best first
  std::string best_text;
  double best_cos = -2;
  int64_t queries = 0;
};


void check_correction_inputs(const at::Tensor& y, const std::vector<std::string>& initial,
                             const std::vector<std::string>& text_ids, const CorrectionOptions& opt) {
  const int64_t B = static_cast<int64_t>(initial.size());
  DAEI_CHECK(y.dim() == 2 && y.size(0) == B, "correction: y must be ({}, d), got ({})", B,
             fmt::format("{}", fmt::join(y.sizes(), ", ")));
  DAEI_CHECK(static_cast<int64_t>(text_ids.size()) == B, "correction: {} text ids for {} texts", text_ids.size(), B);
  {
    std::unordered_set<std::string> ids(text_ids.begin(), text_ids.end());
    DAEI_CHECK(static_cast<int64_t>(ids.size()) == B, "correction: text ids must be distinct (they key the noise)");
  }
  DAEI_CHECK(opt.decoding.num_beams >= 1 && opt.max_steps >= 0 && opt.max_length >= 2 && opt.embed_chunk > 0 &&
                 opt.gen_batch > 0 && opt.queries_per_candidate >= 1 && opt.text_block >= 0,
             "correction: beam >= 1, max_steps >= 0, max_length >= 2, embed_chunk > 0, gen_batch > 0, "
             "queries_per_candidate >= 1 and text_block >= 0 required");
}

// One correction run (run_correction): this rank's texts, a block at a time, and what it has seen of each.
struct CorrectionRun {
  CorrectionRun(const at::Tensor& y, const std::vector<std::string>& text_ids_, const QueryFn& query_,
                const DenoiseFn& denoise_, CorrectorImpl& corrector_, const SpmTokenizer& tok_,
                const CorrectionOptions& opt_, Communicator& comm_)
      : text_ids(text_ids_), query(query_), denoise(denoise_), corrector(corrector_), tok(tok_), opt(opt_),
        comm(comm_), dev(corrector.t5->shared->weight.device()), B(static_cast<int64_t>(text_ids.size())),
        beam(opt.decoding.num_beams) {
    const int64_t block = opt.text_block > 0 ? opt.text_block : std::max<int64_t>(1, opt.gen_batch / beam);
    mine = block_share(B, block, comm);
    blocks = blocks_of(mine, block);
    // ẽ = DAE(y) (B, d), this rank's rows only, a block at a time.
    target = torch::zeros({B, y.size(1)}, torch::TensorOptions().dtype(torch::kFloat32).device(dev));
    for (const auto& bl : blocks)
      target.slice(0, bl.begin, bl.end)
          .copy_(denoise_chunked(denoise, y.slice(0, bl.begin, bl.end).to(dev, torch::kFloat32), opt.embed_chunk));
    st.resize(B);
  }

  const std::vector<std::string>& text_ids;
  const QueryFn& query;
  const DenoiseFn& denoise;
  CorrectorImpl& corrector;
  const SpmTokenizer& tok;
  const CorrectionOptions& opt;
  Communicator& comm;
  const torch::Device dev;
  const int64_t B, beam;  // beam: s, the sequences kept per text
  ItemRange mine;
  std::vector<ItemRange> blocks;
  at::Tensor target;
  std::vector<TextState> st;  // this rank's texts are filled in
  // Each round's answers and cumulative queries, this rank's texts (gathered at the end).
  std::vector<std::vector<std::string>> round_texts;
  std::vector<std::vector<int64_t>> round_queries;

  // Queries the new (input, text) pairs of a round, in chunks; records embeddings and scores.
  void query_new(const std::vector<std::pair<int64_t, std::string>>& todo, int64_t round) {
    std::vector<std::string> texts, keys;
    std::unordered_map<int64_t, int64_t> next_index;
    for (const auto& [b, t] : todo) {
      texts.push_back(t);
      keys.push_back(correction_query_key(text_ids[b], round, next_index[b]++));
    }
    for (size_t c = 0; c < todo.size(); c += opt.embed_chunk) {
      const size_t e = std::min(todo.size(), c + opt.embed_chunk);
      std::vector<std::string> ct(texts.begin() + c, texts.begin() + e), ck(keys.begin() + c, keys.begin() + e);
      at::Tensor noisy = query_averaged(query, ct, ck, opt.queries_per_candidate, opt.embed_chunk).to(dev);
      at::Tensor den = denoise_chunked(denoise, noisy, opt.embed_chunk);
      std::vector<int64_t> rows;
      for (size_t i = c; i < e; ++i) rows.push_back(todo[i].first);
      auto tgt = target.index_select(0, torch::tensor(rows, torch::kLong).to(dev));
      auto cos = torch::cosine_similarity(tgt, den, 1, 1e-8).to(torch::kCPU, torch::kDouble).contiguous();
      const double* pc = cos.data_ptr<double>();
      for (size_t i = c; i < e; ++i) {
        const auto& [b, t] = todo[i];
        st[b].seen[t] = Seen{den[int64_t(i - c)], pc[i - c]};
        st[b].queries += opt.queries_per_candidate;
      }
    }
  }

  // The batch mean of every text's score this round: gathered in text order and summed in that order, so the mean,
  // and the stopping rule that reads it, are the same on every rank and every world size.
  double mean_of(const std::vector<double>& mine_scores) {
    double mean = 0;
    for (double c : gather_in_order(comm, mine_scores)) mean += c;
    return mean / B;
  }

  void record_round() {
    std::vector<std::string> texts;
    std::vector<int64_t> queries;
    for (int64_t b = mine.begin; b < mine.end; ++b) {
      texts.push_back(st[b].best_text);
      queries.push_back(st[b].queries);
    }
    round_texts.push_back(std::move(texts));
    round_queries.push_back(std::move(queries));
  }

  // Round 0: the inverter's hypotheses. Returns the batch mean of their scores.
  double first_round(const std::vector<std::string>& initial, const std::vector<std::vector<int64_t>>& initial_ids) {
    std::vector<double> scores;
    for (const auto& bl : blocks) {
      std::vector<std::pair<int64_t, std::string>> todo;
      for (int64_t b = bl.begin; b < bl.end; ++b) todo.emplace_back(b, initial[b]);
      query_new(todo, 0);
    }
    for (int64_t b = mine.begin; b < mine.end; ++b) {
      if (!initial_ids.empty()) st[b].ids[initial[b]] = initial_ids[b];
      st[b].beams = {initial[b]};
      st[b].best_text = initial[b];
      st[b].best_cos = st[b].seen.at(initial[b]).cos;
      scores.push_back(st[b].best_cos);
    }
    return mean_of(scores);
  }

  // The corrector on every kept sequence of every text of a block, gen_batch rows at a time: the candidates of
  // each input, in generation order.
  std::vector<std::vector<std::string>> propose(const ItemRange& bl, const GenerateOptions& g, int64_t round) {
    const HypothesisIds convention = corrector.cfg.hypothesis_ids;
    std::vector<std::pair<int64_t, std::string>> rows;  // (input, kept sequence)
    for (int64_t b = bl.begin; b < bl.end; ++b)
      for (const auto& t : st[b].beams) rows.emplace_back(b, t);
    std::vector<std::vector<std::string>> cands(B);
    for (size_t c = 0; c < rows.size(); c += opt.gen_batch) {
      const size_t e = std::min(rows.size(), c + opt.gen_batch);
      std::vector<int64_t> idx;
      std::vector<std::string> hyp_texts;
      std::vector<at::Tensor> hyp_e;
      std::vector<const std::vector<int64_t>*> generated;
      for (size_t i = c; i < e; ++i) {
        const auto& [b, t] = rows[i];
        idx.push_back(b);
        hyp_texts.push_back(t);
        hyp_e.push_back(st[b].seen.at(t).e);
        auto it = st[b].ids.find(t);
        generated.push_back(it == st[b].ids.end() ? nullptr : &it->second);
      }
      const at::Tensor ids = hypothesis_batch(convention, tok, hyp_texts, generated, opt.max_length);
      const at::Tensor tgt = target.index_select(0, torch::tensor(idx, torch::kLong).to(dev));
      const at::Tensor he = torch::stack(hyp_e);
      auto out = corrector.generate(tgt, he, ids, g);
      const at::Tensor seqs = out.sequences.cpu();
      if (opt.observe) opt.observe(CorrectorCall{round, tgt, he, ids, seqs, idx, &corrector});
      auto texts = tok.decode_batch(seqs);
      for (size_t i = 0; i < texts.size(); ++i) {
        const int64_t b = idx[i / beam];
        if (convention == HypothesisIds::vec2text && !st[b].ids.count(texts[i]))
          st[b].ids.emplace(texts[i], generated_row(seqs[static_cast<int64_t>(i)], corrector.cfg.t5.pad_token_id));
        cands[b].push_back(std::move(texts[i]));
      }
    }
    return cands;
  }

  // One round on a block: 1. the corrector's candidates; 2. each candidate text not yet seen for its input queried
  // once; 3. the s best distinct candidates kept. Each text's best score of the round goes to `scores`.
  void correct_block(const ItemRange& bl, int64_t round, const GenerateOptions& g, std::vector<double>& scores) {
    const std::vector<std::vector<std::string>> cands = propose(bl, g, round);
    std::vector<std::pair<int64_t, std::string>> todo;
    for (int64_t b = bl.begin; b < bl.end; ++b) {
      std::unordered_set<std::string> fresh;
      for (const auto& t : cands[b])
        if (!st[b].seen.count(t) && fresh.insert(t).second) todo.emplace_back(b, t);
    }
    query_new(todo, round);
    for (int64_t b = bl.begin; b < bl.end; ++b) {
      std::vector<double> cand_scores;
      for (const auto& t : cands[b]) cand_scores.push_back(st[b].seen.at(t).cos);
      auto keep = top_distinct(cands[b], cand_scores, beam);
      DAEI_ASSERT(!keep.empty(), "correction: no candidate for text {}", b);
      st[b].beams.clear();
      for (int64_t i : keep) st[b].beams.push_back(cands[b][i]);
      const double best = cand_scores[keep[0]];
      scores.push_back(best);
      if (best > st[b].best_cos) {
        st[b].best_cos = best;
        st[b].best_text = cands[b][keep[0]];
      }
    }
  }

  // The queries of every text so far, summed over the ranks.
  int64_t total_queries() {
    int64_t q = 0;
    for (int64_t b = mine.begin; b < mine.end; ++b) q += st[b].queries;
    if (comm.size() > 1) q = comm.allreduce(q, ReduceOp::Sum);
    return q;
  }

  // Every text's answer and every round's, in text order, on every rank.
  void gather_into(CorrectionResult& res) {
    std::vector<std::string> best_text;
    std::vector<double> best_cos;
    std::vector<int64_t> queries;
    for (int64_t b = mine.begin; b < mine.end; ++b) {
      best_text.push_back(st[b].best_text);
      best_cos.push_back(st[b].best_cos);
      queries.push_back(st[b].queries);
    }
    res.best_text = gather_in_order(comm, best_text);
    res.best_cos = gather_in_order(comm, best_cos);
    res.queries_per_text = gather_in_order(comm, queries);
    for (size_t t = 0; t < round_texts.size(); ++t) {
      res.round_best_text.push_back(gather_in_order(comm, round_texts[t]));
      res.round_queries.push_back(gather_in_order(comm, round_queries[t]));
    }
  }
};

}  // namespace

std::vector<int64_t> generated_row(const at::Tensor& row, int64_t pad_id) {
  const at::Tensor r = row.to(torch::kCPU, torch::kLong).contiguous();
  const int64_t* p = r.data_ptr<int64_t>();
  int64_t n = r.numel();
  while (n > 1 && p[n - 1] == pad_id) --n;
  return std::vector<int64_t>(p, p + n);
}

std::vector<int64_t> vec2text_row_of_text(const SpmTokenizer& tok, const std::string& text, int64_t max_length) {
  DAEI_CHECK(max_length >= 2, "hypothesis ids: max_length must be >= 2, got {}", max_length);
  const std::vector<int64_t> pieces = tok.encode(text, 0, /*add_eos=*/false);
  std::vector<int64_t> row{tok.pad_id()};  // T5's decoder start is its pad
  const int64_t keep = std::min<int64_t>(static_cast<int64_t>(pieces.size()), max_length - 1);
  row.insert(row.end(), pieces.begin(), pieces.begin() + keep);
  // generate() stops at eos or at max_length ids: a text of max_length - 1 or more pieces was cut there, no eos.
  if (static_cast<int64_t>(pieces.size()) <= max_length - 2) row.push_back(tok.eos_id());
  return row;
}

at::Tensor hypothesis_batch(HypothesisIds convention, const SpmTokenizer& tok, const std::vector<std::string>& texts,
                            const std::vector<const std::vector<int64_t>*>& generated, int64_t max_length) {
  if (convention == HypothesisIds::daei) return tok.encode_batch(texts, max_length).input_ids;
  DAEI_CHECK(generated.empty() || generated.size() == texts.size(), "hypothesis ids: {} generated rows for {} texts",
             generated.size(), texts.size());
  std::vector<std::vector<int64_t>> rows;
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::vector<int64_t>* g = generated.empty() ? nullptr : generated[i];
    if (!g) {
      rows.push_back(vec2text_row_of_text(tok, texts[i], max_length));
      continue;
    }
    rows.emplace_back(g->begin(), g->begin() + std::min<int64_t>(static_cast<int64_t>(g->size()), max_length));
  }
  return pad_token_rows(rows, tok.pad_id(), 0).input_ids;
}

CorrectionResult run_correction(const at::Tensor& y, const std::vector<std::string>& initial,
                                const std::vector<std::string>& text_ids, const QueryFn& query,
                                const DenoiseFn& denoise, CorrectorImpl& corrector, const SpmTokenizer& tok,
                                const CorrectionOptions& opt, Communicator* comm_in,
                                const std::vector<std::vector<int64_t>>& initial_ids) {
  check_correction_inputs(y, initial, text_ids, opt);
  DAEI_CHECK(initial_ids.empty() || initial_ids.size() == initial.size(), "correction: {} initial id rows for {} texts",
             initial_ids.size(), initial.size());
  const int64_t B = static_cast<int64_t>(initial.size());
  LocalCommunicator local;
  Communicator& comm = comm_in ? *comm_in : local;
  torch::NoGradGuard ng;
  const bool was_training = corrector.is_training();
  corrector.eval();
  CorrectionResult res;
  res.queries_per_text.assign(B, 0);
  if (B == 0) return res;

  CorrectionRun run(y, text_ids, query, denoise, corrector, tok, opt, comm);
  res.round_mean_cos.push_back(run.first_round(initial, initial_ids));
  run.record_round();
  GenerateOptions g = opt.decoding;
  g.max_length = opt.max_length;
  g.num_return_sequences = run.beam;
  for (int64_t round = 1; round <= opt.max_steps; ++round) {
    std::vector<double> scores;  // each of this rank's texts' best score this round
    for (const auto& bl : run.blocks) run.correct_block(bl, round, g, scores);
    const double mean = run.mean_of(scores);
    const double prev = res.round_mean_cos.back();
    res.round_mean_cos.push_back(mean);
    res.steps = round;
    run.record_round();
    const int64_t q = run.total_queries();
    LOG_INFO("[correct] round {}/{}: mean best cos {:.5f} (gain {:+.5f}), {:.2f} queries a text so far", round,
             opt.max_steps, mean, mean - prev, double(q) / B);
    if (correction_should_stop(prev, mean, round, opt)) break;
  }
  run.gather_into(res);
  if (was_training) corrector.train();
  return res;
}

}  // namespace daei
