// Private to src/train: the sinks TrainingLog builds (log_sink.hpp); each is defined in its own file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>

#include "log_sink.hpp"

namespace hpctrain::train {

// OUTPUT/metrics.jsonl (jsonl_sink.cpp). Lines with step > start_step (an interrupted run's, after its last
// checkpoint) are dropped first, so the file reads as one run.
std::unique_ptr<LogSink> make_jsonl_sink(const std::filesystem::path& output, int64_t start_step);

// The progress bar when `bar`, else a plain line per logged step (console_sink.cpp).
std::unique_ptr<LogSink> make_console_sink(bool bar, int64_t start_step, int64_t total_steps);

// A new OUTPUT/runs/events.out.tfevents.* file (tensorboard_sink.cpp); a resumed run's file first tells
// TensorBoard to drop the values an earlier file logged after step start_step.
std::unique_ptr<LogSink> make_tensorboard_sink(const std::filesystem::path& output, int64_t start_step);

}  // namespace hpctrain::train
