// The 8-bit AdamW kernel's requantization (Note [8-bit AdamW on CUDA]) checked on the CPU: its threshold lookup,
// compiled for the host from the same header, gives Quantizer::nearest's index for every float tried (edges,
// thresholds and their neighbours, random values, NaN, infinities), for both maps.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "hpctrain/optim/blockwise_quant.hpp"
#include "optim/adamw_8bit_cuda.hpp"

namespace quant = hpctrain::optim::quant;
using hpctrain::optim::detail::clamp_to_map;
using hpctrain::optim::detail::nearest_by_thresholds;

namespace {

// Floats worth trying against a map: its values, its thresholds and each one's neighbours, and random ones.
std::vector<float> lookup_probes(const quant::Quantizer& q) {
  std::vector<float> probes = {0.0f, -0.0f, 1.0f, -1.0f, 2.0f, -2.0f, std::numeric_limits<float>::infinity(),
                               -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(),
                               std::numeric_limits<float>::denorm_min(), -std::numeric_limits<float>::denorm_min()};
  auto around = [&](float x) {
    if (!std::isfinite(x)) return;
    probes.insert(probes.end(), {x, std::nextafter(x, -INFINITY), std::nextafter(x, INFINITY)});
  };
  for (float value : q.code()) around(value);
  for (float threshold : q.thresholds()) around(threshold);
  std::mt19937 random(22);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::uniform_real_distribution<float> exponent(-12.0f, 0.0f);
  for (int i = 0; i < 20000; ++i) probes.push_back(uniform(random) * std::pow(10.0f, exponent(random)));
  return probes;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(adamw_8bit_kernel_lookup)

BOOST_AUTO_TEST_CASE(threshold_search_equals_the_cpu_lookup) {
  for (const quant::Quantizer* q : {&quant::signed_dynamic(), &quant::unsigned_dynamic()}) {
    int mismatches = 0;
    for (float x : lookup_probes(*q)) {
      const unsigned char kernel = nearest_by_thresholds(q->thresholds().data(), clamp_to_map(q->code().data(), x));
      if (kernel != q->nearest(x) && ++mismatches <= 5) BOOST_ERROR("x = " << x << ": kernel " << int(kernel) << ", CPU " << int(q->nearest(x)));
    }
    BOOST_TEST(mismatches == 0);
  }
}

BOOST_AUTO_TEST_CASE(a_block_requantizes_to_the_cpu_codes) {
  std::mt19937 random(5);
  std::normal_distribution<float> normal(0.0f, 1e-3f);
  std::vector<float> block(quant::kBlockSize);
  for (float& x : block) x = normal(random);
  const quant::Quantizer& q = quant::signed_dynamic();
  std::vector<std::uint8_t> cpu(block.size());
  const float absmax = quant::quantize_block(q, block.data(), quant::kBlockSize, cpu.data());
  for (std::size_t i = 0; i < block.size(); ++i) {
    const unsigned char kernel = nearest_by_thresholds(q.thresholds().data(), clamp_to_map(q.code().data(), block[i] / absmax));
    BOOST_TEST(int(kernel) == int(cpu[i]), "element " << i);
  }
}

BOOST_AUTO_TEST_SUITE_END()
