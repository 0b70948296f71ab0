// Writes an HDF5 dataset file (schema version 1, docs/hdf5-format.md).
// The file is written to a temporary next to the final path ("<final>.tmp.<pid>"); commit() renames it
// into place, so a reader never sees a half-written file. Destroying the writer without commit() deletes
// the temporary. Every example is checked before it is written (token ids against the tokenizer's
// vocab_size, labels against label_names), so the writer never produces a file the reader rejects.
// Not thread-safe; one writer per file (in a distributed job, rank 0 writes).
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "hpctrain/data/dataset_schema.hpp"
#include "hpctrain/data/examples.hpp"

namespace hpctrain::data {

struct FileAttributes {
  Task task = Task::text_classification;
  std::vector<std::string> label_names;  // label i is label_names[i]; at least one (none for causal-lm)
  std::string source;                    // where the examples came from (input file names, dataset id)
  std::string created_by;                // program and version, e.g. "hpctrain 0.1.0 prepare"
  nlohmann::json tokenizer = nlohmann::json::object();  // text: must hold "vocab_size"; images: {}
};

struct WriterOptions {
  // gzip (+ byte shuffle): text files 2.6x and MNIST-like image files 5.8x smaller; reads cost
  // ~0.4 CPU s per 100 MB of decompressed arrays. Measured in docs/hdf5-format.md ("Compression").
  Compression compression = Compression::gzip;
  int gzip_level = 4;  // 1 (fast) .. 9 (small); levels above 4 gain < 3% and write up to 25x slower
  int threads = 1;     // threads that compress a text split's chunks (Note [Parallel chunk compression])
  std::size_t queue_bytes = std::size_t{64} << 20;  // with threads > 1: chunks queued per dataset, at most
};

class DatasetWriter {
 public:
  // Throws before any work when `final_path` exists and !overwrite (the message suggests --overwrite),
  // or when the attributes are unusable (no labels, or labels for causal-lm; a text task without
  // tokenizer.vocab_size). A causal-lm split has no labels dataset: the examples' labels are ignored.
  // Creates missing parent directories.
  DatasetWriter(const std::filesystem::path& final_path, const FileAttributes& attributes,
                const WriterOptions& options, bool overwrite);
  ~DatasetWriter();
  DatasetWriter(const DatasetWriter&) = delete;
  DatasetWriter& operator=(const DatasetWriter&) = delete;

  // Whole splits in one call. has_document_starts: the examples carry document_start (packed causal-lm rows).
  void write_text_split(const std::string& split, const TextExamples& examples, bool has_pairs,
                        bool has_document_starts = false);
  void write_image_split(const std::string& split, const ImageExamples& examples);  // computes mean/std

  // The same in pieces: begin, any number of appends (each piece's offsets start at 0), end.
  // One split is open at a time; each split is written once.
  // has_document_starts: the examples carry document_start (packed causal-lm rows); has_loss_mask: every example
  // carries a loss mask (Note [Loss mask] in examples.hpp; causal-lm files only).
  void begin_text_split(const std::string& split, bool has_pairs, bool has_document_starts = false,
                        bool has_loss_mask = false);
  void append_text(const TextExamples& piece);
  void begin_image_split(const std::string& split, int64_t channels, int64_t height, int64_t width);
  void append_images(const ImageExamples& piece);
  void end_split();  // writes num_examples (and mean/std for images)

  // Ends an open split, closes the file and renames it to the final path. The writer is done afterwards.
  void commit();

  [[nodiscard]] const std::filesystem::path& temporary_path() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace hpctrain::data
