// The scaling predictor (Note [Overlap model]) on hand-computed cases, the reducer's bucket sizes, and
// build_info's parsing of LibTorch's configuration text.
#include <boost/test/unit_test.hpp>

#include "hpctrain/core/error.hpp"
#include "hpctrain/train/build_info.hpp"
#include "hpctrain/train/scaling_model.hpp"

using namespace hpctrain::train;
namespace tt = boost::test_tools;

namespace {

// forward 10 ms, backward 20 ms, optimizer 5 ms; buckets of 100 and 300 bytes; α 1 ms, β 10 µs per byte.
// On 4 ranks the buckets cost 6 + 1.5 = 7.5 ms and 6 + 4.5 = 10.5 ms (ring: 2·3 α + 2·3/4 · n · β).
ScalingInputs hand_case(bool overlap, double beta = 1e-5, int zero_stage = 0) {
  ScalingInputs in;
  in.zero_stage = zero_stage;
  in.step = {0.010, 0.020, 0.005};
  in.bucket_bytes = {100, 300};
  in.network = {1e-3, beta};
  in.overlap = overlap;
  return in;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(scaling_model)

BOOST_AUTO_TEST_CASE(one_rank_has_no_communication) {
  const StepPrediction p = predict_step(hand_case(true), 1);
  BOOST_TEST(p.step_s == 0.035, tt::tolerance(1e-12));
  BOOST_TEST(p.comm_s == 0.0);
  BOOST_TEST(p.efficiency == 1.0, tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(without_overlap_every_bucket_follows_backward) {
  const StepPrediction p = predict_step(hand_case(false), 4);
  BOOST_TEST(p.comm_s == 0.018, tt::tolerance(1e-9));
  BOOST_TEST(p.step_s == 0.030 + 0.018 + 0.005, tt::tolerance(1e-9));
  BOOST_TEST(p.exposed_comm_s == 0.018, tt::tolerance(1e-9));
  BOOST_TEST(p.efficiency == 0.035 / 0.053, tt::tolerance(1e-9));
}

BOOST_AUTO_TEST_CASE(overlap_hides_the_buckets_ready_early) {
  // Bucket 0 ready at 10 + 20 · 100/400 = 15 ms, ends 22.5; bucket 1 ready at 30 (end of backward), ends 40.5.
  const StepPrediction p = predict_step(hand_case(true), 4);
  BOOST_TEST(p.step_s == 0.0405 + 0.005, tt::tolerance(1e-9));
  BOOST_TEST(p.exposed_comm_s == 0.0105, tt::tolerance(1e-9));
}

BOOST_AUTO_TEST_CASE(a_slow_first_bucket_delays_the_next) {
  // β 100 µs/byte: bucket 0 costs 6 + 15 = 21 ms from 15 ms (ends 36), bucket 1 costs 6 + 45 = 51 ms from 36.
  const StepPrediction p = predict_step(hand_case(true, 1e-4), 4);
  BOOST_TEST(p.step_s == 0.087 + 0.005, tt::tolerance(1e-9));
  BOOST_TEST(p.comm_s == 0.072, tt::tolerance(1e-9));
}

BOOST_AUTO_TEST_CASE(two_ranks_by_hand) {
  // p = 2: 2 α + n β: 2 + 1 = 3 ms and 2 + 3 = 5 ms; bucket 0 from 15 to 18, bucket 1 from 30 to 35.
  const StepPrediction p = predict_step(hand_case(true), 2);
  BOOST_TEST(p.step_s == 0.040, tt::tolerance(1e-9));
  BOOST_CHECK_THROW((void)predict_step(hand_case(true), 0), hpctrain::Error);
}

// Note [ZeRO step model] on the hand case at 4 ranks: reduce-scatters of half a ring, 3 α + 3/4 · n · β:
// 3 + 0.75 = 3.75 ms (ready at 15, ends 18.75) and 3 + 2.25 = 5.25 ms (ready at 30, ends 35.25); the update of
// a quarter of the parameters, 5 / 4 = 1.25 ms; the norm's allreduce of 8 bytes, 6 α + 1.5 · 8 · β = 6.12 ms;
// the all-gathers, 3.75 + 5.25 = 9 ms after it.
BOOST_AUTO_TEST_CASE(zero_reduce_scatters_updates_a_slice_and_all_gathers) {
  for (const int stage : {1, 2}) {  // the same time: the stages differ in memory only
    const StepPrediction p = predict_step(hand_case(true, 1e-5, stage), 4);
    BOOST_TEST(p.optimizer_s == 0.00125, tt::tolerance(1e-9));
    BOOST_TEST(p.allgather_s == 0.009, tt::tolerance(1e-9));
    BOOST_TEST(p.comm_s == 0.00375 + 0.00525 + 0.00612 + 0.009, tt::tolerance(1e-9));
    BOOST_TEST(p.step_s == 0.03525 + 0.00125 + 0.00612 + 0.009, tt::tolerance(1e-9));
    BOOST_TEST(p.exposed_comm_s == p.step_s - 0.030 - 0.00125, tt::tolerance(1e-9));
    BOOST_TEST(p.efficiency == 0.035 / p.step_s, tt::tolerance(1e-9));
  }
}

BOOST_AUTO_TEST_CASE(zero_moves_the_ring_bytes_of_an_allreduce) {
  // A reduce-scatter plus an all-gather per bucket costs one ring allreduce, at any rank count and β: only the
  // norm's allreduce is added (its 8 bytes).
  for (const int ranks : {2, 3, 8, 64}) {
    const StepPrediction stage0 = predict_step(hand_case(false, 1e-4), ranks);
    const StepPrediction stage1 = predict_step(hand_case(false, 1e-4, 1), ranks);
    const double norm = 2 * (ranks - 1) * 1e-3 + 2.0 * (ranks - 1) / ranks * 8 * 1e-4;
    BOOST_TEST(stage1.comm_s == stage0.comm_s + norm, tt::tolerance(1e-9));
    BOOST_TEST(stage1.optimizer_s == 0.005 / ranks, tt::tolerance(1e-12));
  }
}

BOOST_AUTO_TEST_CASE(zero_on_one_rank_is_stage_0) {
  const StepPrediction p = predict_step(hand_case(true, 1e-5, 2), 1);
  BOOST_TEST(p.step_s == 0.035, tt::tolerance(1e-12));
  BOOST_TEST(p.comm_s == 0.0);
  BOOST_TEST(p.allgather_s == 0.0);
  BOOST_CHECK_THROW((void)predict_step(hand_case(true, 1e-5, 3), 2), hpctrain::Error);
}

// Note [ZeRO-3 step model] at 2 ranks: units of 100, 300 and 200 bytes, half a ring each (α + n β / 2: 1.5, 2.5 and
// 2 ms); gathered in forward, again in backward (resharding), reduce-scattered in backward. A kept unit (a tied
// head's embeddings, Note [Unit gathers]) is gathered in forward only.
BOOST_AUTO_TEST_CASE(zero3_gathers_each_unit_twice_and_a_kept_one_once) {
  ScalingInputs in = hand_case(true, 1e-5, 3);
  in.unit_bytes = {100, 300, 200};
  const double forward = 0.0015 + 0.0025 + 0.002;
  StepPrediction p = predict_step(in, 2);
  BOOST_TEST(p.allgather_s == 2 * forward, tt::tolerance(1e-9));
  in.reshard_after_forward = false;
  p = predict_step(in, 2);
  BOOST_TEST(p.allgather_s == forward, tt::tolerance(1e-9));
  in.reshard_after_forward = true;
  in.unit_kept = {true, false, false};
  p = predict_step(in, 2);
  BOOST_TEST(p.allgather_s == 2 * forward - 0.0015, tt::tolerance(1e-9));
  const double norm = 2 * 1e-3 + 8 * 1e-5;  // the norm's allreduce at 2 ranks: 2 α + n β
  BOOST_TEST(p.comm_s == p.allgather_s + forward + norm, tt::tolerance(1e-9));  // + the reduce-scatters
}

BOOST_AUTO_TEST_CASE(buckets_as_the_reducer_assigns_them) {
  // Backward order c, b, a: c opens the first bucket; b (2 MiB) exceeds the 1 MiB cap, closes it and gets its own.
  const ParameterShapes shapes{{"a", {8}}, {"b", {1 << 19}}, {"c", {2, 2}}};
  BOOST_TEST(gradient_bucket_bytes(shapes) == (std::vector<int64_t>{16, 2 << 20, 32}), tt::per_element());
}

BOOST_AUTO_TEST_CASE(build_settings_from_show_config) {
  const std::string config =
      "PyTorch built with:\n  - Build settings: XBLAS_INFO=x, BLAS_INFO=open, BUILD_TYPE=Release, "
      "CUDA_VERSION=12.4, LAPACK_INFO=open, USE_CUDA=ON\n";
  BOOST_TEST(build_setting(config, "BLAS_INFO") == "open");
  BOOST_TEST(build_setting(config, "LAPACK_INFO") == "open");
  BOOST_TEST(build_setting(config, "USE_CUDA") == "ON");
  BOOST_TEST(build_setting(config, "MISSING") == "");
  BOOST_TEST(cuda_version_text(12040) == "12.4");
  BOOST_TEST(cuda_version_text(11080) == "11.8");
  BOOST_TEST(cudnn_version_text(90100) == "9.1.0");
  BOOST_TEST(cudnn_version_text(8902) == "8.9.2");
}

BOOST_AUTO_TEST_SUITE_END()
