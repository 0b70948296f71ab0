// SGD and Adafactor in float64 against independent references written here from the published
// algorithms with plain loops: torch.optim.SGD's documented pseudo-code, and Adafactor as in Shazeer &
// Stern 2018 (Algorithms 4 and 5: factored second moment R C / (1^T R) with row and column sums, update
// clipping, relative step size, parameter scale) with Transformers' defaults and its decoupled weight
// decay. Parameters: a 2-D and a 3-D weight (factored over the last two dimensions), a bias (no weight
// decay, unfactored) and one that never gets a gradient (left untouched).
#include <boost/test/unit_test.hpp>

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "hpctrain/core/error.hpp"
#include "hpctrain/optim/adafactor.hpp"
#include "hpctrain/optim/sgd.hpp"

using namespace hpctrain::optim;

namespace {

struct RefParam {
  std::vector<int64_t> shape;
  std::vector<double> x;
  double weight_decay = 0;
  // SGD
  std::vector<double> buffer;
  // Adafactor: R (row sums), C (column sums) per leading index, or V; M the first moment
  std::vector<double> r, c, v, m;
  int64_t t = 0;
};

std::vector<double> values(const at::Tensor& t) {
  const at::Tensor c = t.detach().to(at::kDouble).contiguous();
  return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

double rms(const std::vector<double>& a) {
  double s = 0;
  for (double e : a) s += e * e;
  return std::sqrt(s / static_cast<double>(a.size()));
}

void sgd_reference(RefParam& p, const std::vector<double>& grad, double lr, const SgdOptions& o) {
  std::vector<double> g = grad;
  for (std::size_t i = 0; i < g.size(); ++i) g[i] += p.weight_decay * p.x[i];
  if (o.momentum != 0) {
    if (p.t == 0) p.buffer = g;
    else
      for (std::size_t i = 0; i < g.size(); ++i) p.buffer[i] = o.momentum * p.buffer[i] + (1 - o.dampening) * g[i];
    for (std::size_t i = 0; i < g.size(); ++i) g[i] = o.nesterov ? g[i] + o.momentum * p.buffer[i] : p.buffer[i];
  }
  ++p.t;
  for (std::size_t i = 0; i < g.size(); ++i) p.x[i] -= lr * g[i];
}

// 1 / sqrt(V) of Algorithm 4 (factored: V = R C / sum(R) per leading index) or 5, after updating R, C / V.
std::vector<double> inverse_sqrt_second_moment(RefParam& p, const std::vector<double>& g, double beta2, double eps1) {
  std::vector<double> out(g.size());
  if (p.shape.size() < 2) {
    if (p.v.empty()) p.v.assign(g.size(), 0.0);
    for (std::size_t i = 0; i < g.size(); ++i) {
      p.v[i] = beta2 * p.v[i] + (1 - beta2) * (g[i] * g[i] + eps1);
      out[i] = 1 / std::sqrt(p.v[i]);
    }
    return out;
  }
  const auto n = static_cast<std::size_t>(p.shape[p.shape.size() - 2]), m = static_cast<std::size_t>(p.shape.back());
  const std::size_t batches = g.size() / (n * m);
  if (p.r.empty()) p.r.assign(batches * n, 0.0), p.c.assign(batches * m, 0.0);
  for (std::size_t b = 0; b < batches; ++b) {
    std::vector<double> row(n, 0.0), col(m, 0.0);
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < m; ++j) {
        const double g2 = g[(b * n + i) * m + j] * g[(b * n + i) * m + j] + eps1;
        row[i] += g2, col[j] += g2;
      }
    double r_sum = 0;
    for (std::size_t i = 0; i < n; ++i) r_sum += p.r[b * n + i] = beta2 * p.r[b * n + i] + (1 - beta2) * row[i];
    for (std::size_t j = 0; j < m; ++j) p.c[b * m + j] = beta2 * p.c[b * m + j] + (1 - beta2) * col[j];
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < m; ++j) out[(b * n + i) * m + j] = 1 / std::sqrt(p.r[b * n + i] * p.c[b * m + j] / r_sum);
  }
  return out;
}

void adafactor_reference(RefParam& p, const std::vector<double>& g, double lr, const AdafactorOptions& o) {
  ++p.t;
  const double t = static_cast<double>(p.t);
  const double rho = o.relative_step ? std::min(o.warmup_init ? 1e-6 * t : 1e-2, 1 / std::sqrt(t)) : lr;
  const double alpha = (o.scale_parameter ? std::max(o.eps2, rms(p.x)) : 1.0) * rho;
  const double beta2 = 1 - std::pow(t, o.decay_rate);
  std::vector<double> u = inverse_sqrt_second_moment(p, g, beta2, o.eps1);
  for (std::size_t i = 0; i < u.size(); ++i) u[i] *= g[i];
  const double clip = std::max(1.0, rms(u) / o.clip_threshold);
  for (double& e : u) e = alpha * e / clip;
  if (o.beta1 > 0) {
    if (p.m.empty()) p.m.assign(u.size(), 0.0);
    for (std::size_t i = 0; i < u.size(); ++i) u[i] = p.m[i] = o.beta1 * p.m[i] + (1 - o.beta1) * u[i];
  }
  for (std::size_t i = 0; i < u.size(); ++i) p.x[i] = p.x[i] - p.weight_decay * alpha * p.x[i] - u[i];
}

struct Setup {
  NamedParameters named;
  std::vector<RefParam> reference;
};

const std::set<std::string> kReferenceNoDecay = {"layer.bias"};  // Trainer's no-decay group: the bias

Setup make_setup(double weight_decay) {
  at::manual_seed(11);
  Setup s;
  const std::vector<std::pair<std::string, std::vector<int64_t>>> shapes = {
      {"layer.weight", {4, 6}}, {"layer.bias", {6}}, {"conv.weight", {2, 3, 5}}, {"unused.weight", {3, 3}}};
  for (const auto& [name, shape] : shapes) {
    at::Tensor t = at::randn(shape, at::kDouble).set_requires_grad(true);
    s.named.emplace_back(name, t);
    s.reference.push_back(RefParam{shape, values(t), kReferenceNoDecay.count(name) ? 0.0 : weight_decay});
  }
  return s;
}

// Runs `steps` steps of `optimizer` and of `reference_step` on the same gradients (none for
// "unused.weight"); checks the parameters after every step.
template <typename ReferenceStep>
void compare(Setup& s, Optimizer& optimizer, ReferenceStep reference_step, int steps = 5) {
  for (int k = 0; k < steps; ++k) {
    const double lr = 0.1 / (k + 1);
    for (std::size_t i = 0; i + 1 < s.named.size(); ++i) {
      at::Tensor& p = s.named[i].second;
      p.mutable_grad() = at::randn(p.sizes(), at::kDouble) * (k % 2 == 0 ? 1.0 : 1e-3);
      reference_step(s.reference[i], values(p.grad()), lr);
    }
    optimizer.step(lr);
    for (std::size_t i = 0; i < s.named.size(); ++i) {
      const std::vector<double> got = values(s.named[i].second);
      for (std::size_t e = 0; e < got.size(); ++e)
        BOOST_TEST_REQUIRE(std::abs(got[e] - s.reference[i].x[e]) <= 1e-12 * (1 + std::abs(s.reference[i].x[e])),
                           s.named[i].first << "[" << e << "] after step " << k + 1 << ": " << got[e] << " vs "
                                            << s.reference[i].x[e]);
    }
  }
  BOOST_TEST(values(s.named.back().second) == s.reference.back().x);  // no gradient: untouched
}

}  // namespace

BOOST_AUTO_TEST_SUITE(optimizer_reference)

BOOST_AUTO_TEST_CASE(sgd_variants_match_the_reference) {
  for (const SgdOptions& o : {SgdOptions{0.0, 0.0, false}, SgdOptions{0.9, 0.0, false}, SgdOptions{0.9, 0.3, false},
                              SgdOptions{0.7, 0.0, true}}) {
    BOOST_TEST_CONTEXT("momentum " << o.momentum << " dampening " << o.dampening << " nesterov " << o.nesterov) {
      Setup s = make_setup(0.01);
      Sgd optimizer(weight_decay_groups(s.named, 0.01, kReferenceNoDecay), o);
      compare(s, optimizer, [&](RefParam& p, const std::vector<double>& g, double lr) { sgd_reference(p, g, lr, o); });
      BOOST_TEST(optimizer.steps() == 5);
    }
  }
}

BOOST_AUTO_TEST_CASE(sgd_nesterov_needs_momentum_and_no_dampening) {
  BOOST_CHECK_THROW(Sgd({}, SgdOptions{0.0, 0.0, true}), hpctrain::Error);
  BOOST_CHECK_THROW(Sgd({}, SgdOptions{0.9, 0.1, true}), hpctrain::Error);
}

BOOST_AUTO_TEST_CASE(adafactor_variants_match_the_paper) {
  AdafactorOptions trainer;  // Hugging Face Trainer's --optim adafactor
  AdafactorOptions first_moment = trainer;
  first_moment.beta1 = 0.9, first_moment.clip_threshold = 3.0;  // RMS below 3 passes unclipped
  AdafactorOptions relative = trainer;
  relative.relative_step = true, relative.scale_parameter = true, relative.decay_rate = -0.6;
  AdafactorOptions warmup = relative;
  warmup.warmup_init = true;
  for (const AdafactorOptions& o : {trainer, first_moment, relative, warmup}) {
    BOOST_TEST_CONTEXT("beta1 " << o.beta1 << " relative_step " << o.relative_step << " warmup " << o.warmup_init) {
      Setup s = make_setup(0.05);
      Adafactor optimizer(weight_decay_groups(s.named, 0.05, kReferenceNoDecay), o);
      compare(s, optimizer, [&](RefParam& p, const std::vector<double>& g, double lr) { adafactor_reference(p, g, lr, o); });
      const OptimizerState state = optimizer.state_dict();
      BOOST_TEST(state.count("exp_avg_sq_row.layer.weight") == 1);
      BOOST_TEST(state.count("exp_avg_sq.layer.bias") == 1);
      BOOST_TEST(state.count("exp_avg.layer.weight") == (o.beta1 > 0 ? 1u : 0u));
      BOOST_TEST(state.at("step.layer.weight").item<int64_t>() == 5);
      BOOST_TEST(state.at("step.unused.weight").item<int64_t>() == 0);
    }
  }
}

BOOST_AUTO_TEST_CASE(adafactor_step_size_rules) {
  AdafactorOptions o;
  BOOST_TEST(Adafactor({}, o).step_size(0.3, 7, 5.0) == 0.3);  // the given lr, unscaled
  o.relative_step = true;
  BOOST_TEST(Adafactor({}, o).step_size(0.3, 4, 5.0) == 1e-2);          // min(1e-2, 1/2)
  BOOST_TEST(Adafactor({}, o).step_size(0.3, 40000, 5.0) == 1.0 / 200);  // min(1e-2, 1/200)
  o.scale_parameter = true;
  BOOST_TEST(Adafactor({}, o).step_size(0.3, 4, 5.0) == 5.0 * 1e-2);
  BOOST_TEST(Adafactor({}, o).step_size(0.3, 4, 1e-6) == 1e-3 * 1e-2);  // eps2 floors the scale
  o.warmup_init = true;
  BOOST_TEST(Adafactor({}, o).step_size(0.3, 4, 1.0) == 4e-6);
  o.relative_step = false;
  BOOST_CHECK_THROW(Adafactor({}, o), hpctrain::Error);
}

BOOST_AUTO_TEST_CASE(adafactor_state_is_factored_for_matrices) {
  at::Tensor w = at::zeros({64, 32}).set_requires_grad(true), b = at::zeros({32}).set_requires_grad(true);
  const Adafactor optimizer(weight_decay_groups({{"w", w}, {"b", b}}, 0.0, {"b"}), AdafactorOptions{});
  // row 64 + column 32 (+ the step) for the matrix: well under 5 % of its 2048 elements
  BOOST_TEST(optimizer.state_dict().at("exp_avg_sq_row.w").numel() == 64);
  BOOST_TEST(optimizer.state_dict().at("exp_avg_sq_col.w").numel() == 32);
  BOOST_TEST(optimizer.state_bytes() == (64 + 32 + 32) * 4 + 2 * 8);
}

BOOST_AUTO_TEST_SUITE_END()
