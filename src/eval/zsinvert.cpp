#include "eval/zsinvert.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include "core/config.h"
#include "core/error.h"
#include "core/fields.h"
#include "core/log.h"
#include "core/progress.h"
#include "dist/communicator.h"
#include "dist/share.h"
#include "model/net/generate.h"
#include "model/net/precision.h"
#include "model/net/t5.h"
#include "model/text/tokenizer_spm.h"

namespace daei {

ZsInvertOptions zsinvert_options(const Config& cfg) {
  ZsInvertOptions o;
  ZsInvertOptions::fields(o, config_reader(cfg, "zsinvert"));
  o.progress_every_s = cfg.real("train.progress_every_s");
  return o;
}

std::string zsinvert_query_key(const std::string& text_id, char stage, int64_t step, int64_t candidate) {
  return "zs/" + text_id + "/s" + std::string(1, stage) + std::to_string(step) + "/c" + std::to_string(candidate);
}

double naturalness_term(double weight, double logp, size_t tokens) {
  return weight == 0 || tokens == 0 ? 0.0 : weight * logp / static_cast<double>(tokens);
}

int64_t zsinvert_queries_per_text(const ZsInvertOptions& opt, int64_t vocab) {
  const int64_t k = std::min(opt.top_k, vocab - 2);
  const int64_t stage = k + (opt.max_steps - 1) * opt.beam * k;
  return opt.refine ? 2 * stage : stage;
}

ZsGenerator t5_generator(std::shared_ptr<T5ModelImpl> t5, std::shared_ptr<const SpmTokenizer> tok,
                         int64_t max_input_len) {
  ZsGenerator g;
  g.eos_id = t5->cfg.eos_token_id;
  g.pad_id = t5->cfg.pad_token_id;
  g.decode = [tok](const std::vector<int64_t>& ids) { return tok->decode(ids); };
  // The LM head only at each row's last real position (logits for every position would be n · L · V floats).
  g.next = [t5, tok, max_input_len](const std::vector<std::vector<int64_t>>& prefixes,
                                    const std::vector<std::string>& enc_texts) -> at::Tensor {
    DAEI_CHECK(prefixes.size() == enc_texts.size(), "generator: {} prefixes but {} encoder texts", prefixes.size(),
               enc_texts.size());
    torch::NoGradGuard ng;
    t5->eval();
    const auto dev = t5->shared->weight.device();
    const int64_t n = static_cast<int64_t>(prefixes.size());
    // The encoder once per distinct input text (stage A: one, the empty text = [eos]).
    std::vector<std::string> uniq;
    std::unordered_map<std::string, int64_t> where;
    std::vector<int64_t> row_of;
    for (const auto& t : enc_texts) {
      auto [it, fresh] = where.emplace(t, static_cast<int64_t>(uniq.size()));
      if (fresh) uniq.push_back(t);
      row_of.push_back(it->second);
    }
    auto eb = tok->encode_batch(uniq, max_input_len);
    auto emask = eb.attention_mask.to(dev);
    auto enc = t5->encode_ids(eb.input_ids.to(dev), emask);
    auto sel = torch::tensor(row_of, torch::kLong).to(dev);
    enc = enc.index_select(0, sel);
    emask = emask.index_select(0, sel);
    // Decoder inputs: the start token + the prefix, right-padded (causal: padding after a row changes nothing).
    int64_t L = 1;
    for (const auto& p : prefixes) L = std::max<int64_t>(L, static_cast<int64_t>(p.size()) + 1);
    auto dec = torch::full({n, L}, t5->cfg.pad_token_id, torch::kLong);
    std::vector<int64_t> last(n);
    {
      auto a = dec.accessor<int64_t, 2>();
      for (int64_t i = 0; i < n; ++i) {
        a[i][0] = t5->cfg.decoder_start_token_id;
        for (size_t j = 0; j < prefixes[i].size(); ++j) a[i][j + 1] = prefixes[i][j];
        last[i] = static_cast<int64_t>(prefixes[i].size());
      }
    }
    auto h = t5->decoder->forward(t5->embed(dec.to(dev)), {}, enc, emask);  // (n, L, d)
    auto pos = torch::tensor(last, torch::kLong).to(dev);
    h = h.gather(1, pos.view({n, 1, 1}).expand({n, 1, h.size(2)})).squeeze(1);  // (n, d)
    const bool tied = t5->cfg.tie_word_embeddings;
    if (tied) h = h * std::pow(static_cast<double>(t5->cfg.d_model), -0.5);
    auto logits = mp_linear(h, tied ? t5->shared->weight : t5->lm_head->weight).to(torch::kFloat32);
    return torch::log_softmax(logits, 1).cpu();
  };
  return g;
}

namespace {

struct Beam {
  std::vector<int64_t> ids;
  double logp = 0;  // the LM's log-probability of ids (unpenalised), for the naturalness term
};

struct TextSearch {
  std::vector<Beam> beams;
  std::string best_text;
  double best_cos = -2;    // the cosine of best_text
  double best_score = -std::numeric_limits<double>::infinity();  // cos + naturalness · mean log-prob: the ranking
  int64_t queries = 0;
};

at::Tensor shield_chunked(const DenoiseFn& shield, const at::Tensor& x, int64_t chunk) {
  std::vector<at::Tensor> parts;
  for (int64_t b = 0; b < x.size(0); b += chunk) {
    auto part = x.slice(0, b, std::min(x.size(0), b + chunk));
    at::Tensor d = shield(part);
    DAEI_CHECK(d.sizes() == part.sizes(), "zsinvert: the shield returned ({}) for ({})",
               fmt::format("{}", fmt::join(d.sizes(), ", ")), fmt::format("{}", fmt::join(part.sizes(), ", ")));
    parts.push_back(d.to(torch::kCPU, torch::kFloat32));
  }
  return parts.size() == 1 ? parts[0] : torch::cat(parts, 0);
}


void check_zsinvert_inputs(const at::Tensor& y, const std::vector<std::string>& text_ids, const ZsGenerator& lm,
                           const ZsInvertOptions& opt) {
  const int64_t B = static_cast<int64_t>(text_ids.size());
  DAEI_CHECK(y.dim() == 2 && y.size(0) == B, "zsinvert: y must be ({}, d), got ({})", B,
             fmt::format("{}", fmt::join(y.sizes(), ", ")));
  {
    std::unordered_set<std::string> ids(text_ids.begin(), text_ids.end());
    DAEI_CHECK(static_cast<int64_t>(ids.size()) == B, "zsinvert: text ids must be distinct (they key the noise)");
  }
  DAEI_CHECK(opt.beam >= 1 && opt.top_k >= 1 && opt.max_steps >= 1 && opt.repetition_penalty > 0 &&
                 opt.embed_chunk > 0 && opt.lm_batch > 0 && opt.text_batch > 0,
             "zsinvert: beam, top_k, max_steps, embed_chunk, lm_batch, text_batch >= 1 and repetition_penalty > 0 "
             "required");
  DAEI_CHECK(lm.next && lm.decode, "zsinvert: no generator");
}

// One step's candidates, per text of the group, in (beam, rank) order.
struct Candidates {
  std::vector<std::vector<std::vector<int64_t>>> ids;
  std::vector<std::vector<double>> logp;         // the LM's log-probability of each (0 at naturalness 0)
  std::vector<std::vector<std::string>> text;    // decoded
  std::vector<std::vector<double>> cos;          // the black box's answer against the target
};

// The search for one group of texts (text_batch of them): their beams and best texts, a step at a time.
struct GroupSearch {
  GroupSearch(const at::Tensor& y, const ItemRange& group, const std::vector<std::string>& text_ids_,
              const QueryFn& query_, const DenoiseFn& shield_, const ZsGenerator& lm_, const ZsInvertOptions& opt_)
      : text_ids(text_ids_), query(query_), shield(shield_), lm(lm_), opt(opt_), g0(group.begin), G(group.size()),
        target(shield_chunked(shield, y.narrow(0, g0, G).to(torch::kFloat32), opt.embed_chunk)), st(G) {}

  const std::vector<std::string>& text_ids;
  const QueryFn& query;
  const DenoiseFn& shield;
  const ZsGenerator& lm;
  const ZsInvertOptions& opt;
  const int64_t g0, G;
  const at::Tensor target;  // the shielded release of each text of the group
  std::vector<TextSearch> st;

  // A stage's beams start empty; its encoder texts: stage A (0) the empty text, stage B the best text so far.
  std::vector<std::string> start_stage(int64_t stage) {
    std::vector<std::string> enc_text(G);
    for (int64_t g = 0; g < G; ++g) {
      st[g].beams = {Beam{}};
      if (stage == 1) enc_text[g] = st[g].best_text;
    }
    return enc_text;
  }

  // One step of every text of the group: proposals, queries, the beams kept.
  void run_step(const std::vector<std::string>& enc_text, char stage_name, int64_t step) {
    Candidates cands = propose(enc_text);
    score(cands, stage_name, step);
    keep_best(cands);
  }

  // 1. The LM on every kept prefix: top-k proposals (penalised, no EOS or pad), lm_batch prefixes a call.
  Candidates propose(const std::vector<std::string>& enc_text) const {
    std::vector<std::pair<int64_t, int64_t>> rows;  // (text in group, beam)
    for (int64_t g = 0; g < G; ++g)
      for (int64_t b = 0; b < static_cast<int64_t>(st[g].beams.size()); ++b) rows.emplace_back(g, b);
    Candidates cands;
    cands.ids.resize(G);
    cands.logp.resize(G);
    for (size_t c = 0; c < rows.size(); c += static_cast<size_t>(opt.lm_batch)) {
      const size_t e = std::min(rows.size(), c + static_cast<size_t>(opt.lm_batch));
      propose_rows(std::vector<std::pair<int64_t, int64_t>>(rows.begin() + c, rows.begin() + e), enc_text, cands);
    }
    return cands;
  }

  // One call of the LM on these (text in group, beam) rows: their top-k continuations appended to cands.
  void propose_rows(const std::vector<std::pair<int64_t, int64_t>>& rows, const std::vector<std::string>& enc_text,
                    Candidates& cands) const {
    std::vector<std::vector<int64_t>> prefixes;
    std::vector<std::string> enc;
    for (const auto& [g, b] : rows) {
      prefixes.push_back(st[g].beams[b].ids);
      enc.push_back(enc_text[g]);
    }
    at::Tensor scores = lm.next(prefixes, enc).to(torch::kCPU, torch::kFloat32).contiguous();
    DAEI_CHECK(scores.dim() == 2 && scores.size(0) == static_cast<int64_t>(prefixes.size()),
               "zsinvert: the generator returned ({}) for {} prefixes",
               fmt::format("{}", fmt::join(scores.sizes(), ", ")), prefixes.size());
    const int64_t V = scores.size(1);
    const at::Tensor raw = opt.naturalness != 0 ? scores.clone() : at::Tensor();
    apply_repetition_penalty(scores, prefixes, opt.repetition_penalty);
    for (int64_t t : {lm.eos_id, lm.pad_id})
      if (t >= 0 && t < V) scores.select(1, t).fill_(-std::numeric_limits<float>::infinity());
    const int64_t k = std::min(opt.top_k, V - 2);
    DAEI_CHECK(k >= 1, "zsinvert: a vocabulary of {} tokens has nothing to propose besides EOS and pad", V);
    auto top = std::get<1>(scores.topk(k, 1, true, true)).contiguous();  // sorted: ties keep a fixed order
    auto a = top.accessor<int64_t, 2>();
    const float* praw = raw.defined() ? raw.data_ptr<float>() : nullptr;
    for (size_t i = 0; i < rows.size(); ++i) {
      const Beam& from = st[rows[i].first].beams[rows[i].second];
      for (int64_t j = 0; j < k; ++j) {
        const int64_t tok = a[static_cast<int64_t>(i)][j];
        std::vector<int64_t> ids(from.ids);
        ids.push_back(tok);
        cands.ids[rows[i].first].push_back(std::move(ids));
        cands.logp[rows[i].first].push_back(praw ? from.logp + double(praw[static_cast<int64_t>(i) * V + tok]) : 0.0);
      }
    }
  }

  // 2. Every candidate is one query (fresh noise key), embed_chunk texts a call; only scores are kept.
  void score(Candidates& cands, char stage_name, int64_t step) {
    cands.text.resize(G);
    cands.cos.resize(G);
    std::vector<std::string> texts, keys;
    std::vector<std::pair<int64_t, int64_t>> owner;  // (text in group, candidate)
    auto flush = [&] {
      if (texts.empty()) return;
      at::Tensor e = shield_chunked(shield, query_chunked(query, texts, keys, opt.embed_chunk), opt.embed_chunk);
      std::vector<int64_t> sel;
      for (const auto& o : owner) sel.push_back(o.first);
      auto tgt = target.index_select(0, torch::tensor(sel, torch::kLong));
      auto cos = torch::cosine_similarity(tgt, e, 1, 1e-8).to(torch::kDouble).contiguous();
      const double* pc = cos.data_ptr<double>();
      for (size_t i = 0; i < owner.size(); ++i) cands.cos[owner[i].first][owner[i].second] = pc[i];
      texts.clear();
      keys.clear();
      owner.clear();
    };
    for (int64_t g = 0; g < G; ++g) {
      const int64_t nc = static_cast<int64_t>(cands.ids[g].size());
      cands.cos[g].assign(nc, -2.0);
      for (int64_t j = 0; j < nc; ++j) {
        cands.text[g].push_back(lm.decode(cands.ids[g][j]));
        texts.push_back(cands.text[g].back());
        keys.push_back(zsinvert_query_key(text_ids[g0 + g], stage_name, step, j));
        owner.emplace_back(g, j);
        if (static_cast<int64_t>(texts.size()) >= opt.embed_chunk) flush();
      }
      st[g].queries += nc;
    }
    flush();
  }

  // 3. Keep the beam best distinct texts by their score (the cosine alone at naturalness 0); remember the best seen.
  void keep_best(const Candidates& cands) {
    for (int64_t g = 0; g < G; ++g) {
      if (cands.text[g].empty()) continue;
      std::vector<double> score(cands.cos[g]);
      for (size_t j = 0; j < score.size(); ++j)
        score[j] += naturalness_term(opt.naturalness, cands.logp[g][j], cands.ids[g][j].size());
      auto keep = top_distinct(cands.text[g], score, opt.beam);
      std::vector<Beam> next;
      for (int64_t i : keep) next.push_back(Beam{cands.ids[g][i], cands.logp[g][i]});
      st[g].beams = std::move(next);
      if (score[keep[0]] > st[g].best_score) {
        st[g].best_score = score[keep[0]];
        st[g].best_cos = cands.cos[g][keep[0]];
        st[g].best_text = cands.text[g][keep[0]];
      }
    }
  }

  // The progress line after a step: the group's mean best cosine and queries a text.
  std::string progress_line(int64_t B, char stage_name, int64_t step) const {
    double mean = 0;
    int64_t q = 0;
    for (const auto& s : st) {
      mean += s.best_cos / double(G);
      q += s.queries;
    }
    return fmt::format("texts {}-{} of {}, stage {} step {}/{}: best cos {:.4f}, {} queries/text", g0 + 1, g0 + G, B,
                       stage_name, step, opt.max_steps, mean, q / std::max<int64_t>(1, G));
  }
};

}  // namespace

ZsInvertResult run_zsinvert(const at::Tensor& y, const std::vector<std::string>& text_ids, const QueryFn& query,
                            const DenoiseFn& shield, const ZsGenerator& lm, const ZsInvertOptions& opt,
                            Communicator* comm_in) {
  check_zsinvert_inputs(y, text_ids, lm, opt);
  const int64_t B = static_cast<int64_t>(text_ids.size());
  LocalCommunicator local;
  Communicator& comm = comm_in ? *comm_in : local;
  torch::NoGradGuard ng;
  ZsInvertResult res;
  res.best_text.resize(B);
  res.best_cos.assign(B, -2.0);
  res.stage_a_cos.assign(B, -2.0);
  res.queries_per_text.assign(B, 0);
  if (B == 0) return res;

  const int64_t stages = opt.refine ? 2 : 1;
  const ItemRange mine = block_share(B, opt.text_batch, comm);
  Progress progress("zsinvert", mine.size() * stages * opt.max_steps, "text-step", opt.progress_every_s);
  int64_t done = 0, total_queries = 0;
  for (const ItemRange& group : blocks_of(mine, opt.text_batch)) {
    GroupSearch search(y, group, text_ids, query, shield, lm, opt);
    const int64_t g0 = search.g0, G = search.G;
    for (int64_t stage = 0; stage < stages; ++stage) {
      const char stage_name = stage == 0 ? 'A' : 'B';
      const std::vector<std::string> enc_text = search.start_stage(stage);
      for (int64_t step = 1; step <= opt.max_steps; ++step) {
        search.run_step(enc_text, stage_name, step);
        done += G;
        progress.update(done, search.progress_line(B, stage_name, step));
      }
      if (stage == 0)
        for (int64_t g = 0; g < G; ++g) res.stage_a_cos[g0 + g] = search.st[g].best_cos;
    }
    for (int64_t g = 0; g < G; ++g) {
      res.best_text[g0 + g] = search.st[g].best_text;
      res.best_cos[g0 + g] = search.st[g].best_cos;
      res.queries_per_text[g0 + g] = search.st[g].queries;
      total_queries += search.st[g].queries;
    }
  }
  if (comm.size() > 1) {
    // Every text's answer, in text order, on every rank.
    auto slice = [&](const auto& v) { return std::vector(v.begin() + mine.begin, v.begin() + mine.end); };
    res.best_text = gather_in_order(comm, slice(res.best_text));
    res.best_cos = gather_in_order(comm, slice(res.best_cos));
    res.stage_a_cos = gather_in_order(comm, slice(res.stage_a_cos));
    res.queries_per_text = gather_in_order(comm, slice(res.queries_per_text));
    total_queries = comm.allreduce(total_queries, ReduceOp::Sum);
  }
  LOG_INFO("[zsinvert] {} texts: {:.1f} queries per text ({} in all)", B, double(total_queries) / double(B),
           total_queries);
  return res;
}

}  // namespace daei
