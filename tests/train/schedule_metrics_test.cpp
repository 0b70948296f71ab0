#include <boost/test/unit_test.hpp>

#include <cmath>

#include "hpctrain/core/error.hpp"
#include "hpctrain/train/metrics.hpp"
#include "hpctrain/train/schedule.hpp"

using namespace hpctrain::train;

BOOST_AUTO_TEST_SUITE(schedule)

BOOST_AUTO_TEST_CASE(linear_warmup_then_decay_to_zero) {
  const LrSchedule s{ScheduleKind::linear, 1.0, 10, 110};
  BOOST_TEST(learning_rate(s, 0) == 0.0);
  BOOST_TEST(learning_rate(s, 5) == 0.5);
  BOOST_TEST(learning_rate(s, 10) == 1.0);
  BOOST_TEST(learning_rate(s, 60) == 0.5);
  BOOST_TEST(learning_rate(s, 110) == 0.0);
  BOOST_TEST(learning_rate(s, 200) == 0.0);
}

BOOST_AUTO_TEST_CASE(cosine_half_cycle) {
  const LrSchedule s{ScheduleKind::cosine, 2.0, 0, 100};
  BOOST_TEST(learning_rate(s, 0) == 2.0);
  BOOST_TEST(std::abs(learning_rate(s, 50) - 1.0) < 1e-12);
  BOOST_TEST(std::abs(learning_rate(s, 100)) < 1e-12);
}

BOOST_AUTO_TEST_CASE(constant_after_warmup) {
  const LrSchedule s{ScheduleKind::constant, 3.0, 4, 100};
  BOOST_TEST(learning_rate(s, 2) == 1.5);
  BOOST_TEST(learning_rate(s, 4) == 3.0);
  BOOST_TEST(learning_rate(s, 99) == 3.0);
}

BOOST_AUTO_TEST_CASE(warmup_ratio_rounds_up_and_names_bad_input) {
  BOOST_TEST(warmup_steps_from_ratio(0.1, 95) == 10);
  BOOST_TEST(warmup_steps_from_ratio(0.0, 95) == 0);
  BOOST_CHECK_THROW(warmup_steps_from_ratio(1.5, 10), hpctrain::Error);
  BOOST_CHECK_THROW(parse_schedule("exponential"), hpctrain::Error);
  BOOST_TEST(to_string(parse_schedule("cosine")) == "cosine");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(metrics)

BOOST_AUTO_TEST_CASE(precision_recall_f1_as_scikit_learn) {
  // labels:      0 0 0 1 1 2
  // predictions: 0 0 1 1 2 2
  ConfusionMatrix m(3);
  const int labels[] = {0, 0, 0, 1, 1, 2}, predicted[] = {0, 0, 1, 1, 2, 2};
  for (int i = 0; i < 6; ++i) m.add(labels[i], predicted[i]);
  const auto r = compute_metrics(m);
  BOOST_TEST(r.examples == 6);
  BOOST_TEST(std::abs(r.accuracy - 4.0 / 6.0) < 1e-12);
  // class 0: P 1, R 2/3, F1 0.8; class 1: P 1/2, R 1/2, F1 1/2; class 2: P 1/2, R 1, F1 2/3.
  BOOST_TEST(std::abs(r.per_class[0].f1 - 0.8) < 1e-12);
  BOOST_TEST(std::abs(r.per_class[1].f1 - 0.5) < 1e-12);
  BOOST_TEST(std::abs(r.per_class[2].f1 - 2.0 / 3.0) < 1e-12);
  BOOST_TEST(std::abs(r.macro_f1 - (0.8 + 0.5 + 2.0 / 3.0) / 3.0) < 1e-12);
  BOOST_TEST(r.per_class[0].support == 3);
}

BOOST_AUTO_TEST_CASE(absent_class_scores_zero_and_bad_labels_throw) {
  ConfusionMatrix m(2);
  m.add(0, 0);
  const auto r = compute_metrics(m);
  BOOST_TEST(r.per_class[1].f1 == 0.0);
  BOOST_TEST(r.macro_f1 == 0.5);
  BOOST_CHECK_THROW(m.add(2, 0), hpctrain::Error);
  BOOST_CHECK_THROW(m.add(0, -1), hpctrain::Error);
}

BOOST_AUTO_TEST_CASE(majority_baseline_is_the_largest_share) {
  BOOST_TEST(majority_baseline({1, 6, 3}) == 0.6);
  BOOST_TEST(majority_baseline({0, 0}) == 0.0);
}

BOOST_AUTO_TEST_SUITE_END()
