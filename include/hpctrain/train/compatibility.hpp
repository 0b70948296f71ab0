// What a model and a dataset must agree on before any batch runs, checked once for train, eval and
// predict (Note [Model fits the dataset]), and the check that loaded weights hold finite values.
//
// Note [Model fits the dataset]
// A dataset file and a model folder come from different places. Without this check a mismatch surfaces
// deep in LibTorch ("index out of range in self") on the first batch that hits it. Checked from the
// config and the file's metadata (token lengths come from the offsets, no token is read):
//   text   model_type distilbert or bert; vocab_size >= the dataset tokenizer's vocab_size (the reader
//          checks every token id against the latter); max_position_embeddings >= the longest example of
//          each split used; BERT type_vocab_size >= 2 when the split stores token_type_ids (DistilBERT
//          has no segment embeddings and ignores them, as transformers does)
//   images model_type hpctrain-cnn or hpctrain-mlp; in_channels and image_size equal the split's C x H x W
//   labels num_labels equal the dataset's, unless `train` takes the labels from the dataset
#pragma once

#include <string>
#include <vector>

#include "hpctrain/data/dataset_reader.hpp"
#include "hpctrain/io/hf_config.hpp"
#include "hpctrain/models/model.hpp"

namespace hpctrain::train {

// Error naming the model source, the dataset file and split, the config field, expected and actual.
// `check_labels`: false for train, whose head is sized from the dataset's labels.
void check_model_fits_dataset(const io::HfConfig& config, const std::string& model_source,
                              const data::DatasetReader& dataset, const std::vector<std::string>& splits,
                              bool check_labels);

// Error naming the first tensor of `model` that holds NaN/Inf values (and how many it holds).
void check_finite_weights(const models::Model& model, const std::string& model_source);
// The same for one tensor named `name`.
void check_finite_tensor(const at::Tensor& tensor, const std::string& name, const std::string& model_source);

}  // namespace hpctrain::train
