// Start-up agreement of the ranks (Note [Agreed options]): every rank describes the options that must
// agree and the dataset's identity; the ranks compare one digest in one collective, and on a mismatch
// every rank fails naming each differing option with each rank's value.
//
// Note [Agreed options]
// Ranks started with different options used to hang (different --gradient-accumulation-steps or
// --check-sync-every: different numbers of collectives), end with a bare MPI_ERR_TRUNCATE (different
// --batch-size, --max-steps, --eval-steps or split sizes: different collective lengths) or train
// silently wrong (--lr, --seed, --shuffle, another file at --data). So train, eval and predict agree
// before their first collective whose length or count depends on an option: every member of
// TrainOptions is listed once in train_option_fields() (a static_assert counts the members) with its
// Agreement; paths are compared by the identity of what they name (path_identity, dataset_identity), as
// nodes may mount one file at different paths; --threads may differ (cores per node do).
// Audit of the collectives whose length or count depends on a value, each derived from agreed values:
//  - train loop: steps and micro-batches per step from --epochs/--max-steps/--gradient-accumulation-steps,
//    the split size (dataset identity) and the resume point (rank 0's, broadcast: find_resume_point);
//    the 3-double allreduce per micro-batch has a fixed length.
//  - ShardLoader::batches_per_epoch: split size, --batch-size, world size, --shuffle (equal on every rank).
//  - evaluation: no per-batch collectives; the confusion-matrix allreduce has num_labels^2 entries
//    (model structure, checked by ddp::check_same_structure in prepare_model; eval/predict: the model
//    folder's identity). predict and gather_for_metrics allgather their row counts before the rows.
//  - broadcast_tensors / load_state: the root broadcasts its header (names, shapes) before the data.
//  - the gradient reducer's buckets: --bucket-mb, --first-bucket-mb and the parameter order and shapes
//    (checked structure); row-sparse bucket lengths come from a max-allreduce of marks (identical).
//  - --check-sync-every, --eval-steps, --save-steps decide when find_unsynchronized, evaluation and the
//    save agreement run; --skip-nonfinite whether every rank stops or skips after the agreed non-finite
//    flag: agreed values.
//  - the resume point: rank 0 picks it (--resume, --output are rank 0's) and broadcasts the folder and
//    its trainer_state.json; the geometry then comes from that state and agreed options (plan_start).
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "hpctrain/data/dataset_reader.hpp"
#include "hpctrain/dist/comm.hpp"
#include "hpctrain/train/train_options.hpp"

namespace hpctrain::train {

// (what, value) pairs in a fixed order; "what" names the option ("--lr", "--data (file size)").
using RunDescription = std::vector<std::pair<std::string, std::string>>;

// Identity of a path's content, not its text: for a file, its size and the SHA-256 of its first and last
// 64 KiB; for a folder, the same for each model, config and tokenizer file in it. "" for an empty path;
// "missing" when nothing is there. Throws Error naming the path when a file cannot be read.
[[nodiscard]] std::string path_identity(const std::filesystem::path& path);

// Pure: the options that must agree (Agreement::value and ::content); `identify(flag, text)` gives a
// content option's identity (--data is left out: add_dataset_identity describes it).
[[nodiscard]] RunDescription describe_train_options(
    const TrainOptions& options, const std::function<std::string(const std::string& flag, const std::string& text)>& identify);
// Appends the dataset's identity (data::dataset_identity) as "FLAG (NAME)" entries.
void add_dataset_identity(RunDescription& description, const std::string& flag, const data::DatasetReader& dataset);

// Pure: "" when every rank's description is the same; otherwise one line per differing entry, e.g.
// "--gradient-accumulation-steps differs across ranks: rank 0 has 2, rank 1 has 4".
[[nodiscard]] std::string describe_differences(const std::vector<RunDescription>& per_rank);

// Collective: one allgather of a 32-byte digest of `mine`; when they differ every rank receives every
// description and throws Error: "the ranks of this job disagree on WHAT:\n" + describe_differences.
void agree_across_ranks(dist::Comm& comm, const RunDescription& mine, const std::string& what);

// Collective: describes `options` (paths by path_identity) and `dataset`, and agrees across ranks.
void agree_on_train_run(dist::Comm& comm, const TrainOptions& options, const data::DatasetReader& dataset);

}  // namespace hpctrain::train
