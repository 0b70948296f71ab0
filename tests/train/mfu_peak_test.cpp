// Note [MFU never above 100 %]: the peak measurement, the running peak (raised when a measured one is exceeded,
// kept and clamped for --peak-tflops) and the metrics.jsonl lines the training log writes with it.
#include <boost/test/unit_test.hpp>

#include <nlohmann/json.hpp>

#include <fstream>
#include <string>

#include "fixtures.hpp"
#include "hpctrain/train/peak_flops.hpp"
#include "train/log/training_log.hpp"

using namespace hpctrain::train;

BOOST_AUTO_TEST_SUITE(mfu_peak)

BOOST_AUTO_TEST_CASE(a_measured_peak_is_raised_when_exceeded) {
  MfuPeak peak(100.0, /*measured=*/true);
  const MfuPeak::Reading below = peak.read(50.0);
  BOOST_TEST(below.mfu == 0.5);
  BOOST_TEST(!below.peak_raised);
  BOOST_TEST(below.note.empty());
  const MfuPeak::Reading above = peak.read(150.0);
  BOOST_TEST(above.mfu == 1.0);
  BOOST_TEST(above.peak_raised);
  BOOST_TEST(above.note.find("above the peak") != std::string::npos, above.note);
  BOOST_TEST(peak.peak() == 150.0);
  BOOST_TEST(peak.read(75.0).mfu == 0.5);  // against the raised peak
  const MfuPeak::Reading again = peak.read(300.0);
  BOOST_TEST(again.mfu == 1.0);
  BOOST_TEST(again.note.empty());  // said once
}

BOOST_AUTO_TEST_CASE(a_given_peak_stays_and_the_mfu_is_clamped) {
  MfuPeak peak(100.0, /*measured=*/false);
  const MfuPeak::Reading above = peak.read(250.0);
  BOOST_TEST(above.mfu == 1.0);
  BOOST_TEST(above.clamped);
  BOOST_TEST(!above.peak_raised);
  BOOST_TEST(above.note.find("--peak-tflops") != std::string::npos, above.note);
  BOOST_TEST(peak.peak() == 100.0);
  BOOST_TEST(peak.read(40.0).mfu == 0.4);
}

BOOST_AUTO_TEST_CASE(the_measurement_is_a_positive_rate) {
  BOOST_TEST(measure_peak_flops(at::Device(at::kCPU), at::kFloat, 64, 0.01, 2) > 0.0);
}

BOOST_AUTO_TEST_CASE(metrics_lines_never_carry_an_mfu_above_one) {
  trainer_test::Scratch scratch("mfu");
  TrainOptions options;
  options.output = scratch.dir();
  options.logging_steps = 1, options.progress = false, options.report_to = "none";
  {
    TrainingLog log(options, /*active=*/true, 0, 3);
    log.set_peak_flops(1e9, /*measured=*/true);
    StepRecord record;
    record.times.total = 1.0;
    for (const double flops : {0.5e9, 2e9, 1e9}) {  // 50 %, then above the peak (raised to 2e9), then 50 %
      ++record.step;
      record.flops = flops;
      (void)log.add_step(record);
    }
    log.finish();
  }
  std::ifstream in(scratch / "metrics.jsonl");
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  BOOST_TEST_REQUIRE(lines.size() == 3u);
  BOOST_TEST(lines[0].at("mfu").get<double>() == 0.5);
  BOOST_TEST(lines[1].at("mfu").get<double>() == 1.0);
  BOOST_TEST(lines[1].at("mfu_peak_raised").get<bool>());
  BOOST_TEST(lines[2].at("mfu").get<double>() == 0.5);
  BOOST_TEST(!lines[2].contains("mfu_peak_raised"));
}

BOOST_AUTO_TEST_SUITE_END()
