// The contextual embedder's export (a sentence-transformers directory, the layout of GTR's upload: reference notes §1)
// and its final report (test recall@1 of clean and noisy queries).
#include <torch/torch.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/config.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/log.h"
#include "core/safetensors.h"
#include "data/corpus.h"
#include "data/run_layout.h"
#include "stages/recipes/sentence_embedder.h"

namespace daei {
namespace fs = std::filesystem;
using nlohmann::json;

void export_sentence_transformer(const ContextualEmbedderImpl& m, const std::string& spiece, int64_t max_length,
                                 const std::string& dir) {
  DAEI_CHECK(!fs::exists(dir), "{} exists: the export is written whole into a new folder", dir);
  DAEI_CHECK(file_exists(spiece), "{}: no SentencePiece model to export", spiece);
  const std::string tmp = temp_sibling(dir);
  fs::remove_all(tmp);
  make_dirs(tmp + "/1_Pooling");
  make_dirs(tmp + "/2_Dense");
  make_dirs(tmp + "/3_Normalize");  // Normalize writes no files (sentence-transformers), the folder names the module
  const auto& c = m.t5->cfg;
  const int64_t dim = m.dense->weight.size(0);
  const std::string st = "sentence_transformers.models.";
  json modules = json::array({{{"idx", 0}, {"name", "0"}, {"path", ""}, {"type", st + "Transformer"}},
                              {{"idx", 1}, {"name", "1"}, {"path", "1_Pooling"}, {"type", st + "Pooling"}},
                              {{"idx", 2}, {"name", "2"}, {"path", "2_Dense"}, {"type", st + "Dense"}},
                              {{"idx", 3}, {"name", "3"}, {"path", "3_Normalize"}, {"type", st + "Normalize"}}});
  write_file_atomic(tmp + "/modules.json", modules.dump(2) + "\n");
  // The transformer: Hugging Face T5EncoderModel (config.json keys of T5Config, its weight names).
  json config = json::parse(c.to_json_text());
  config["architectures"] = {"T5EncoderModel"};
  config["torch_dtype"] = "float32";
  config["use_cache"] = false;
  write_file_atomic(tmp + "/config.json", config.dump(2) + "\n");
  save_safetensors(tmp + "/model.safetensors", module_state(*m.t5, true), {{"format", "pt"}});
  fs::copy_file(spiece, tmp + "/spiece.model");
  // No extra_ids: the T5 has exactly the SentencePiece model's pieces (sentinels were the pretrain stage's only).
  write_file_atomic(tmp + "/tokenizer_config.json",
                    json{{"tokenizer_class", "T5Tokenizer"}, {"extra_ids", 0}, {"model_max_length", max_length},
                         {"eos_token", "</s>"}, {"unk_token", "<unk>"}, {"pad_token", "<pad>"}}
                            .dump(2) + "\n");
  write_file_atomic(tmp + "/sentence_bert_config.json",
                    json{{"max_seq_length", max_length}, {"do_lower_case", false}}.dump(2) + "\n");
  write_file_atomic(tmp + "/1_Pooling/config.json",
                    json{{"word_embedding_dimension", c.d_model},
                         {"pooling_mode_cls_token", false},
                         {"pooling_mode_mean_tokens", true},
                         {"pooling_mode_max_tokens", false},
                         {"pooling_mode_mean_sqrt_len_tokens", false}}
                            .dump(2) + "\n");
  write_file_atomic(tmp + "/2_Dense/config.json",
                    json{{"in_features", c.d_model},
                         {"out_features", dim},
                         {"bias", false},
                         {"activation_function", "torch.nn.modules.linear.Identity"}}
                            .dump(2) + "\n");
  save_safetensors(tmp + "/2_Dense/model.safetensors",
                   TensorMap{{"linear.weight", m.dense->weight.detach().cpu().contiguous()}}, {{"format", "pt"}});
  fs::rename(tmp, dir);
}

RecallAt1 recall_at_1(const at::Tensor& queries, const at::Tensor& clean) {
  torch::NoGradGuard ng;
  const int64_t n = queries.size(0);
  DAEI_CHECK(n == clean.size(0) && n > 0, "recall@1: {} queries for {} candidates", n, clean.size(0));
  auto q = torch::nn::functional::normalize(queries, torch::nn::functional::NormalizeFuncOptions().dim(1));
  auto sims = torch::matmul(q, clean.t());
  auto right = torch::arange(n, torch::kLong);
  RecallAt1 r;
  r.recall = (sims.argmax(1) == right).to(torch::kDouble).mean().item<double>();
  r.mean_cos = sims.diagonal().to(torch::kDouble).mean().item<double>();
  return r;
}

std::vector<std::string> embedder_report_texts(const Config& cfg, const std::string& run_dir) {
  const int64_t most = EmbedderTrainOptions::from_config(cfg).report_texts;
  const std::string file = RunLayout(run_dir).corpus("test");
  std::vector<std::string> texts;
  if (most <= 0) return texts;
  if (!file_exists(file)) {
    LOG_WARN("[embedder] no {}: no final report", file);
    return texts;
  }
  for_each_corpus_row(file, [&](int64_t, int64_t, std::string t) {
    if (int64_t(texts.size()) < most) texts.push_back(std::move(t));
  });
  return texts;
}

// final/report.json: recall@1 of each test text among the report's texts, the query embedded clean and, at each σ of
// embedder_train.report_sigmas, as f(x) + N(0, σ²I) (noise seeded by run.seed) against clean candidates; with the
// mean cosine of the (noisy) query to its own clean embedding.
void EmbedderStage::write_report(const std::string& final_dir) {
  const auto& texts = data_.report_texts;
  auto clean = embed(texts);
  json rows = json::array();
  auto add = [&](double sigma, const at::Tensor& q) {
    const auto r = recall_at_1(q, clean);
    rows.push_back({{"sigma", sigma}, {"recall_at_1", r.recall}, {"mean_cos", r.mean_cos}});
    LOG_INFO("[embedder] report: {} test texts, query σ {}: recall@1 {:.4f}, mean cos to clean {:.4f}", texts.size(),
             sigma, r.recall, r.mean_cos);
  };
  add(0.0, clean);
  auto g = at::make_generator<at::CPUGeneratorImpl>(seed_ ^ 0x5E9027ULL);
  for (double s : options_.report_sigmas) add(s, clean + s * torch::randn(clean.sizes(), g));
  json rep{{"texts", texts.size()},
           {"split", "test"},
           {"dim", clean.size(1)},
           {"candidates", "the same texts' clean embeddings"},
           {"noise", "query = f(x) + N(0, sigma^2 I), f(x) unit; cosine ranking"},
           {"rows", rows}};
  write_file_atomic(final_dir + "/report.json", rep.dump(2) + "\n");
}

}  // namespace daei
