// `hpctrain bench predict`: step time and scaling efficiency of data-parallel training on 1…N nodes × G GPUs,
// from one rank's step (measured here on random data, or given) and an α-β (from `bench comm --json`, or a link).
#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "bench_machine.hpp"
#include "commands.hpp"
#include "hpctrain/core/error.hpp"
#include "hpctrain/io/hf_config.hpp"
#include "hpctrain/optim/optimizer.hpp"
#include "hpctrain/train/parallel/strategy.hpp"
#include "hpctrain/train/scaling_model.hpp"
#include "option_parsing.hpp"

namespace hpctrain::cli {
namespace {

constexpr const char* kBenchPredictUsage =
    "hpctrain bench predict --model-config FILE [--batch-size N] [--sequence-length L] [--threads T] [--steps S]\n"
    "    [--forward-ms F --backward-ms B --optimizer-ms O] (--comm-json FILE | --latency-us A --link-gbps G)\n"
    "    [--nodes N] [--gpus-per-node G] [--overlap on|off] [--zero-stage 0|1|2|3]\n"
    "    [--zero-reshard-after-forward true|false] [--json]";

struct PredictArgs {
  std::string model_config, comm_json, overlap = "on";
  ZeroFlags zero;
  int threads = 1, steps = 5, warmup = 1, nodes = 1, gpus_per_node = 1;
  double forward_ms = -1, backward_ms = -1, optimizer_ms = -1, latency_us = -1, link_gbps = -1;
  bool json = false;
};

po::options_description predict_options(PredictArgs& a, train::MemoryEstimateOptions& o) {
  po::options_description g("Predict");
  g.add_options()
      ("model-config", po::value(&a.model_config), "config.json of the model (its parameters give the gradient buckets)")
      ("batch-size", po::value(&o.batch_size)->default_value(o.batch_size), "examples per rank per step (measured step)")
      ("sequence-length", po::value(&o.sequence_length)->default_value(o.sequence_length), "tokens per example")
      ("threads", po::value(&a.threads)->default_value(a.threads), "CPU threads of the measured step")
      ("steps", po::value(&a.steps)->default_value(a.steps), "measured steps (the median of each phase)")
      ("warmup", po::value(&a.warmup)->default_value(a.warmup), "untimed steps before them")
      ("forward-ms", po::value(&a.forward_ms), "given step: forward (with --backward-ms, --optimizer-ms; no measuring)")
      ("backward-ms", po::value(&a.backward_ms), "given step: backward")
      ("optimizer-ms", po::value(&a.optimizer_ms), "given step: optimizer")
      ("comm-json", po::value(&a.comm_json), "α-β from `hpctrain bench comm --json` output")
      ("latency-us", po::value(&a.latency_us), "α of the target network: seconds per message, in µs")
      ("link-gbps", po::value(&a.link_gbps), "β of the target network as link bandwidth, Gb/s")
      ("nodes", po::value(&a.nodes)->default_value(a.nodes), "predict for 1, 2, 4, ... up to this many nodes")
      ("gpus-per-node", po::value(&a.gpus_per_node)->default_value(a.gpus_per_node), "ranks per node")
      ("overlap", po::value(&a.overlap)->default_value(a.overlap), "on | off: buckets reduced during backward")
      ("json", po::bool_switch(&a.json), "print JSON instead of the table");
  return g;
}

dist::AlphaBeta network(const PredictArgs& a) {
  const bool link = a.latency_us >= 0 || a.link_gbps >= 0;
  HPCTRAIN_CHECK(link != !a.comm_json.empty(), "bench predict: give either --comm-json FILE or --latency-us and "
                 "--link-gbps (got {})", link ? "both kinds" : "neither");
  if (link) {
    HPCTRAIN_CHECK(a.latency_us >= 0 && a.link_gbps > 0, "bench predict: --latency-us (>= 0, got {}) and --link-gbps "
                   "(> 0, got {}) go together", a.latency_us, a.link_gbps);
    return {a.latency_us * 1e-6, 8 / (a.link_gbps * 1e9)};
  }
  std::ifstream in(a.comm_json);
  HPCTRAIN_CHECK(in.good(), "bench predict: cannot read --comm-json {}", a.comm_json);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  HPCTRAIN_CHECK(j.is_object() && j.contains("fit") && j["fit"].contains("alpha_s") && j["fit"].contains("beta_s_per_byte"),
                 "bench predict: --comm-json {} is not `hpctrain bench comm --json` output (expected fit.alpha_s and "
                 "fit.beta_s_per_byte)", a.comm_json);
  return {j["fit"]["alpha_s"].get<double>(), j["fit"]["beta_s_per_byte"].get<double>()};
}

train::StepProfile step_profile(const PredictArgs& a, const io::HfConfig& config, const train::MemoryEstimateOptions& o) {
  const int given = (a.forward_ms >= 0) + (a.backward_ms >= 0) + (a.optimizer_ms >= 0);
  HPCTRAIN_CHECK(given == 0 || given == 3, "bench predict: --forward-ms, --backward-ms and --optimizer-ms go together "
                 "(got {} of 3)", given);
  if (given == 3) return {a.forward_ms / 1e3, a.backward_ms / 1e3, a.optimizer_ms / 1e3};
  return train::measure_step_profile(config, o, a.threads, a.warmup, a.steps);
}

std::vector<int> node_counts(int max_nodes) {
  HPCTRAIN_CHECK(max_nodes >= 1, "bench predict: --nodes must be at least 1, got {}", max_nodes);
  std::vector<int> out;
  for (int n = 1; n < max_nodes; n *= 2) out.push_back(n);
  out.push_back(max_nodes);
  return out;
}

nlohmann::json assumptions(const PredictArgs& a, bool measured) {
  return nlohmann::json::array({
      measured ? fmt::format("single-rank step measured here: {} threads, median of {} steps after {} warm-up, random "
                             "token ids, fp32", a.threads, a.steps, a.warmup)
               : std::string("single-rank step as given (--forward-ms, --backward-ms, --optimizer-ms)"),
      "weak scaling: the batch per rank is fixed; compute per rank does not change with the rank count",
      "gradients fp32, bucketed as the reducer does (first bucket 1 MiB, then 25 MiB: dist/buckets.hpp)",
      "ring allreduce per bucket: 2(p-1)/p * bytes * beta + 2(p-1) * alpha, one alpha-beta for every ring step "
      "(the slowest link's; no hierarchy inside a node)",
      a.overlap == "on" ? "backward yields gradient bytes at a constant rate; one communication thread reduces the "
                          "buckets in order as they become ready; computation is not slowed by it"
                        : "no overlap: every bucket is reduced after backward",
      "the optimizer starts after the last bucket"});
}

// Note [ZeRO step model], for the assumptions the prediction prints.
void add_zero_assumptions(nlohmann::json& lines, int zero_stage, bool reshard) {
  if (zero_stage == 0) return;
  if (zero_stage == 3) {  // Note [ZeRO-3 step model]
    lines.push_back(fmt::format("--zero-stage 3: the units (embeddings, each layer, the head) gathered in forward (half "
                                "a ring each, the next one prefetched while one computes, compute proportional to the "
                                "unit's bytes){}; each unit's gradients reduce-scattered after its backward; one "
                                "communication timeline for all of them; then the norm's 8-byte allreduce and the "
                                "update of 1/p of the parameters; no all-gather after the update",
                                reshard ? " and again in backward (--zero-reshard-after-forward true: 1.5x stage 0's "
                                          "bytes at 2 ranks), but a tied head's embeddings, kept from forward to the "
                                          "end of backward" : " only (kept to backward: stage 0's bytes)"));
    return;
  }
  lines.push_back(fmt::format("--zero-stage {}: each bucket reduce-scattered (half a ring: (p-1) alpha + (p-1)/p * "
                              "bytes * beta) where stage 0 allreduces it, overlapped with backward alike; one 8-byte "
                              "allreduce (the global gradient norm); the update of 1/p of the parameters (optimizer "
                              "time / p)", zero_stage));
  lines.push_back("then the updated parameters all-gathered bucket by bucket (the other half ring each), after the "
                  "whole update: exposed, as hpctrain does it (no overlap with later buckets' updates); padding "
                  "ignored; stages 1 and 2 take the same time (they differ in memory); efficiency (the single-rank stage-0 step "
                  "over this step) exceeds 100 % where the sharded update saves more than the exposed all-gathers cost");
}

nlohmann::json prediction_json(const PredictArgs& a, const train::ScalingInputs& in) {
  int64_t gradient_bytes = 0;
  for (const int64_t b : in.bucket_bytes) gradient_bytes += b;
  nlohmann::json rows = nlohmann::json::array();
  for (const int nodes : node_counts(a.nodes)) {
    const train::StepPrediction p = train::predict_step(in, nodes * a.gpus_per_node);
    rows.push_back({{"nodes", nodes}, {"ranks", p.ranks}, {"step_s", p.step_s}, {"comm_s", p.comm_s},
                    {"exposed_comm_s", p.exposed_comm_s}, {"efficiency", p.efficiency}});
    if (in.zero_stage > 0) rows.back()["allgather_s"] = p.allgather_s, rows.back()["optimizer_s"] = p.optimizer_s;
  }
  nlohmann::json lines = assumptions(a, a.forward_ms < 0);
  add_zero_assumptions(lines, in.zero_stage, in.reshard_after_forward);
  nlohmann::json out = {{"machine", bench_machine_json()},
          {"step", {{"forward_s", in.step.forward_s}, {"backward_s", in.step.backward_s},
                    {"optimizer_s", in.step.optimizer_s}}},
          {"gradient_bytes", gradient_bytes}, {"buckets", in.bucket_bytes.size()}, {"bucket_bytes", in.bucket_bytes},
          {"network", {{"alpha_s", in.network.alpha_s}, {"beta_s_per_byte", in.network.beta_s_per_byte}}},
          {"gpus_per_node", a.gpus_per_node}, {"overlap", in.overlap}, {"zero_stage", in.zero_stage},
          {"predictions", rows}, {"assumptions", lines}};
  if (!in.unit_bytes.empty()) out["unit_bytes"] = in.unit_bytes;
  return out;
}

void print_prediction_table(const nlohmann::json& j) {
  print_bench_machine(j["machine"]);
  const auto& s = j["step"];
  std::printf("single-rank step: forward %.2f ms, backward %.2f ms, optimizer %.2f ms\n", 1e3 * s["forward_s"].get<double>(),
              1e3 * s["backward_s"].get<double>(), 1e3 * s["optimizer_s"].get<double>());
  std::printf("gradients: %.1f MiB in %zu buckets; network: alpha %.2f us, beta %.4f ns/byte (%.1f Gb/s)\n",
              j["gradient_bytes"].get<double>() / (1 << 20), j["buckets"].get<std::size_t>(),
              1e6 * j["network"]["alpha_s"].get<double>(), 1e9 * j["network"]["beta_s_per_byte"].get<double>(),
              8e-9 / j["network"]["beta_s_per_byte"].get<double>());
  const bool zero = j["zero_stage"].get<int>() > 0;
  if (zero) std::printf("ZeRO stage %d: comm ms = reduce-scatters + norm + all-gathers\n", j["zero_stage"].get<int>());
  if (j.contains("unit_bytes"))
    std::printf("units (stage 3): %zu, %.1f MiB in all\n", j["unit_bytes"].size(), j["gradient_bytes"].get<double>() / (1 << 20));
  std::printf("%6s %6s %12s %12s %14s %11s%s\n", "nodes", "ranks", "step ms", zero ? "comm ms" : "allreduce ms",
              "exposed ms", "efficiency", zero ? "  all-gather ms" : "");
  for (const auto& r : j["predictions"]) {
    std::printf("%6d %6d %12.2f %12.2f %14.2f %10.1f%%", r["nodes"].get<int>(), r["ranks"].get<int>(),
                1e3 * r["step_s"].get<double>(), 1e3 * r["comm_s"].get<double>(),
                1e3 * r["exposed_comm_s"].get<double>(), 100 * r["efficiency"].get<double>());
    if (zero) std::printf(" %14.2f", 1e3 * r["allgather_s"].get<double>());
    std::printf("\n");
  }
  std::printf("assumptions:\n");
  for (const auto& line : j["assumptions"]) std::printf("  - %s\n", line.get<std::string>().c_str());
}

int print_prediction(const PredictArgs& a, const train::ScalingInputs& in) {
  const nlohmann::json j = prediction_json(a, in);
  if (a.json) std::printf("%s\n", j.dump(2).c_str());
  else print_prediction_table(j);
  return 0;
}

void check_args(const PredictArgs& a, const train::MemoryEstimateOptions& o) {
  HPCTRAIN_CHECK(!a.model_config.empty(), "bench predict: --model-config FILE is required (the gradient sizes)");
  HPCTRAIN_CHECK(a.overlap == "on" || a.overlap == "off", "bench predict: --overlap is on or off, got '{}'", a.overlap);
  HPCTRAIN_CHECK(a.gpus_per_node >= 1, "bench predict: --gpus-per-node must be at least 1, got {}", a.gpus_per_node);
  (void)train::parallel::parse_zero_stage(a.zero.stage);
  optim::validate_optimizer_options(o.optimizer);
}

}  // namespace

int bench_predict_command(const Args& args) {
  PredictArgs a;
  train::MemoryEstimateOptions o;
  po::options_description all(kBenchPredictUsage);
  po::variables_map values;
  if (!parse_options(args, kBenchPredictUsage, all.add(predict_options(a, o)).add(zero_group(a.zero)).add(optimizer_group(o.optimizer)), values)) return 0;
  check_args(a, o);
  const io::HfConfig config = io::HfConfig::load(a.model_config);
  train::ScalingInputs in;
  in.network = network(a);
  in.overlap = a.overlap == "on";
  in.zero_stage = a.zero.stage;
  in.bucket_bytes = train::gradient_bucket_bytes(train::parameter_shapes(config));
  if (in.zero_stage == 3) {
    train::Zero3Units units = train::zero3_units(config);
    in.unit_bytes = std::move(units.bytes), in.unit_kept = std::move(units.kept);
    in.reshard_after_forward = reshard_after_forward(a.zero);
  }
  in.step = step_profile(a, config, o);
  return print_prediction(a, in);
}

}  // namespace hpctrain::cli
