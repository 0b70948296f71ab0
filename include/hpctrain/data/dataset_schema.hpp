// HDF5 dataset file, schema version 1: the names, enums and chunk sizes shared by the writer and the reader.
// The layout itself is documented in docs/hdf5-format.md; this header only names its parts.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace hpctrain::data {

// causal_lm: token rows for next-token prediction (`prep lm`), without labels (docs/hdf5-format.md).
enum class Task { text_classification, image_classification, causal_lm };
enum class Compression { none, gzip };

// Tasks whose splits hold token ids (input_ids + offsets): text classification and causal LM.
[[nodiscard]] constexpr bool is_text_task(Task task) { return task != Task::image_classification; }
// Tasks whose splits hold a labels dataset and whose file names them (label_names non-empty).
[[nodiscard]] constexpr bool has_labels(Task task) { return task != Task::causal_lm; }

[[nodiscard]] std::string_view to_string(Task task);
[[nodiscard]] std::string_view to_string(Compression compression);
// Parse the spelling used in the file and on the command line ("text-classification", "gzip", ...);
// unknown text throws Error listing the accepted values.
[[nodiscard]] Task parse_task(std::string_view text);
[[nodiscard]] Compression parse_compression(std::string_view text);

namespace schema {

inline constexpr int64_t kFormatVersion = 1;

// Root attributes.
inline constexpr const char* kAttrFormat = "hpctrain_format";
inline constexpr const char* kAttrTask = "task";
inline constexpr const char* kAttrLabelNames = "label_names";  // JSON array of strings
inline constexpr const char* kAttrSource = "source";
inline constexpr const char* kAttrCreatedBy = "created_by";
inline constexpr const char* kAttrTokenizer = "tokenizer";      // JSON object; "{}" for images

// Split group attribute and per-split datasets.
inline constexpr const char* kAttrNumExamples = "num_examples";
inline constexpr const char* kInputIds = "input_ids";            // int32 [T]
inline constexpr const char* kOffsets = "offsets";               // int64 [N+1]
inline constexpr const char* kTokenTypeIds = "token_type_ids";   // uint8 [T], sentence pairs only
inline constexpr const char* kDocumentStart = "document_start";  // uint8 [T], causal-lm rows packed by documents
inline constexpr const char* kLossMask = "loss_mask";            // uint8 [T], 0 or 1; causal-lm from prep sft only
inline constexpr const char* kLabels = "labels";                 // int64 [N]; not in causal-lm files
inline constexpr const char* kSourceIndex = "source_index";      // int64 [N]
inline constexpr const char* kPixels = "pixels";                 // uint8 [N, C, H, W]
inline constexpr const char* kAttrMean = "mean";                 // float64 [C], of pixel/255
inline constexpr const char* kAttrStd = "std";                   // float64 [C], of pixel/255 (population std)

inline constexpr std::array<std::string_view, 3> kSplitNames = {"train", "validation", "test"};

// Chunk sizes along the example (or token) axis, in elements: 32-64 KiB per chunk. A random example
// read decompresses one chunk per dataset, so small chunks keep global-shuffle streaming cheap; 4x larger
// chunks compressed only ~1% better but made random reads ~4x slower (docs/hdf5-format.md).
inline constexpr int64_t kTokenChunk = 16 * 1024;       // input_ids (64 KiB), token_type_ids and loss_mask (16 KiB)
inline constexpr int64_t kExampleChunk = 4 * 1024;      // offsets, labels, source_index (32 KiB)
inline constexpr int64_t kImageChunkBytes = 64 * 1024;  // pixels: as many whole images as fit (at least one)

// token_type_ids values are segment ids: 0 for the first sentence, 1 for the second.
inline constexpr int64_t kNumTokenTypes = 2;

}  // namespace schema

[[nodiscard]] bool is_known_split(std::string_view split);

}  // namespace hpctrain::data
