// The pretrain stage's T5 (runs/NAME/pretrain/final/t5: config.json, model.safetensors and training.json, whose
// "tokenizer_vocab" V and "sentinels" S say that ids V..V+S-1 are span corruption's sentinels) loaded into the T5 of
// an inverter or corrector, which has the tokenizer's V pieces only: the sentinel rows are dropped. Needs nothing of
// the stage that wrote it (stages/recipes/pretrain.h), so the stages that start from it do not include that recipe.
#pragma once
#include <string>
#include <vector>

namespace daei {

class T5ModelImpl;

// What load_pretrained_t5 did with each tensor of the checkpoint.
struct PretrainedLoad {
  std::vector<std::string> copied;  // copied unchanged
  std::vector<std::string> cut;     // token embeddings: the rows of the tokenizer's pieces copied, sentinels dropped
};
// Copies the pretrain stage's T5 (`dir` = final/t5) into `t5`, the T5 of an inverter or corrector of the same shape
// over the tokenizer's vocabulary. Every tensor of the checkpoint goes into the model and every tensor of the model
// comes from the checkpoint; a different shape, vocabulary or tensor set is refused naming the file.
PretrainedLoad load_pretrained_t5(T5ModelImpl& t5, const std::string& dir);

}  // namespace daei
