// 4-bit blockwise quantization as bitsandbytes 0.50's CPU backend (nf4.hpp, Note [4-bit rounding]).
#include "hpctrain/models/nf4.hpp"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>

#include "hpctrain/core/dynamic_map.hpp"
#include "hpctrain/core/error.hpp"
#include "models/nf4_cpu.hpp"

#if HPCTRAIN_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace hpctrain::models {
namespace {

// bitsandbytes' get_4bit_type: NF4's 16 quantiles of N(0, 1) scaled to [-1, 1] (ascending), and FP4 (1 sign, 2
// exponent, 1 mantissa bit, bias 2) divided by its largest magnitude 12, in bit order. FP4's code 8 ("-0") is +0 as
// in its table (the integer -0 of a Python list) and its AVX-512 dequantizer; only its scalar C loop gives -0.
const std::array<float, 16> kNf4Values = {
    -1.0f, static_cast<float>(-0.6961928009986877), static_cast<float>(-0.5250730514526367),
    static_cast<float>(-0.39491748809814453), static_cast<float>(-0.28444138169288635),
    static_cast<float>(-0.18477343022823334), static_cast<float>(-0.09105003625154495), 0.0f,
    static_cast<float>(0.07958029955625534), static_cast<float>(0.16093020141124725),
    static_cast<float>(0.24611230194568634), static_cast<float>(0.33791524171829224),
    static_cast<float>(0.44070982933044434), static_cast<float>(0.5626170039176941),
    static_cast<float>(0.7229568362236023), 1.0f};
const std::array<float, 16> kFp4Values = {
    0.0f / 12.0f,  0.0625f / 12.0f,  8.0f / 12.0f,  12.0f / 12.0f,  4.0f / 12.0f,  6.0f / 12.0f,  2.0f / 12.0f,  3.0f / 12.0f,
    0.0f,          -0.0625f / 12.0f, -8.0f / 12.0f, -12.0f / 12.0f, -4.0f / 12.0f, -6.0f / 12.0f, -2.0f / 12.0f, -3.0f / 12.0f};
// torch.argsort of the FP4 values (the ascending order bitsandbytes' quantizer maps back through): +0 (code 0)
// sorts before -0 (code 8).
constexpr std::array<std::uint8_t, 16> kFp4Order = {11, 10, 13, 12, 15, 14, 9, 0, 8, 1, 6, 7, 4, 5, 2, 3};

// The quantizer of a type: the 15 midpoints of its values in ascending order, and the code of each interval.
struct Quant4Quantizer {
  std::array<float, 15> midpoints;
  std::array<std::uint8_t, 16> code_of;
};

Quant4Quantizer make_quantizer(Quant4Type type) {
  Quant4Quantizer q;
  const std::array<float, 16>& values = quant4_values(type);
  for (int i = 0; i < 16; ++i) q.code_of[i] = type == Quant4Type::nf4 ? static_cast<std::uint8_t>(i) : kFp4Order[i];
  for (int i = 0; i < 15; ++i) q.midpoints[i] = (values[q.code_of[i]] + values[q.code_of[i + 1]]) / 2.0f;
  return q;
}

const Quant4Quantizer& quantizer(Quant4Type type) {
  static const Quant4Quantizer nf4 = make_quantizer(Quant4Type::nf4), fp4 = make_quantizer(Quant4Type::fp4);
  return type == Quant4Type::nf4 ? nf4 : fp4;
}

// torch.bucketize(scaled, midpoints): the number of midpoints strictly below `scaled`, mapped to its code.
std::uint8_t code_of(const Quant4Quantizer& q, float scaled) {
  int below = 0;
  for (float midpoint : q.midpoints) below += midpoint < scaled ? 1 : 0;
  return q.code_of[below];
}

// The smallest absmax bitsandbytes divides by: torch.clamp(min=1e-38), the double 1e-38 rounded to float32.
const float kTinyAbsmax = static_cast<float>(1e-38);

// One block of n elements (n == blocksize, or the last, partial block): codes into `out` (one per element), the
// stored absmax returned.
float quantize_block(const Quant4Quantizer& q, const float* x, int64_t n, bool whole, std::uint8_t* out) {
  float absmax = 0.0f;
  for (int64_t i = 0; i < n; ++i) absmax = std::max(absmax, std::fabs(x[i]));
  const float divisor = std::max(absmax, kTinyAbsmax);
  const float reciprocal = 1.0f / divisor;
  for (int64_t i = 0; i < n; ++i) {
    const float scaled = whole ? x[i] * reciprocal : x[i] / divisor;
    out[i] = code_of(q, std::min(1.0f, std::max(-1.0f, scaled)));
  }
  return whole ? absmax : divisor;
}

// Note [4-bit rounding], nested absmax: bitsandbytes' 8-bit CPU quantizer's table of 65,536 bins over [-1, 1].
struct NestedQuantizer {
  std::array<float, 256> map;
  std::vector<std::uint8_t> bins;

  NestedQuantizer() : map(core::dynamic_map(true)), bins(65536) {
    std::array<float, 255> midpoints;
    for (int i = 0; i < 255; ++i) midpoints[i] = 0.5f * (map[i] + map[i + 1]);
    int code = 0;
    for (int i = 0; i < 65536; ++i) {
      const float value = -1.0f + (2.0f * static_cast<float>(i)) / 65535.0f;
      while (code < 255 && midpoints[code] < value) ++code;
      bins[i] = static_cast<std::uint8_t>(code);
    }
  }
  [[nodiscard]] std::uint8_t code(float scaled) const {
    const float clamped = std::min(1.0f, std::max(-1.0f, scaled));
    const float position = ((clamped + 1.0f) * 0.5f) * 65535.0f;
    return bins[static_cast<std::uint16_t>(position + 0.5f)];
  }
};

const NestedQuantizer& nested_quantizer() {
  static const NestedQuantizer q;
  return q;
}

// absmax - offset quantized in blocks of 256: codes into `codes`, each block's absmax into `absmax2`.
void quantize_nested(const float* y, int64_t n, std::uint8_t* codes, float* absmax2) {
  const NestedQuantizer& q = nested_quantizer();
  for (int64_t block = 0, first = 0; first < n; ++block, first += kNestedBlockSize) {
    const int64_t last = std::min(n, first + kNestedBlockSize);
    float m = 0.0f;
    for (int64_t i = first; i < last; ++i) m = std::max(m, std::fabs(y[i]));
    absmax2[block] = m;
    if (m == 0.0f) {
      std::fill(codes + first, codes + last, std::uint8_t{0});
      continue;
    }
    const float reciprocal = 1.0f / m;
    for (int64_t i = first; i < last; ++i) codes[i] = q.code(y[i] * reciprocal);
  }
}

void check_cpu_or_cuda(const Quant4Weight& w) {
  HPCTRAIN_CHECK(w.codes.defined() && w.codes.scalar_type() == at::kByte, "4-bit weight: expected uint8 codes");
}

#if HPCTRAIN_WITH_CUDA
at::Tensor device_table(const float* values, int64_t n, const at::Device& device) {
  return at::from_blob(const_cast<float*>(values), {n}, at::TensorOptions().dtype(at::kFloat)).to(device);
}

at::Tensor block_absmax_cuda(const Quant4Weight& w) {
  if (!w.nested()) return w.absmax;
  static const std::array<float, 256> map = core::dynamic_map(true);
  at::Tensor out = at::empty({w.blocks()}, w.absmax2.options());
  const at::Tensor table = device_table(map.data(), 256, w.absmax.device());
  detail::NestedAbsmaxCudaArgs args;
  args.dynamic_map = table.data_ptr<float>();
  args.absmax_codes = w.absmax.data_ptr<std::uint8_t>();
  args.absmax2 = w.absmax2.data_ptr<float>();
  args.offset = w.offset.data_ptr<float>();
  args.absmax_out = out.data_ptr<float>();
  args.blocks = w.blocks();
  const char* error = detail::quant4_nested_absmax_cuda(args, c10::cuda::getCurrentCUDAStream().stream());
  HPCTRAIN_CHECK(error == nullptr, "4-bit weight: the nested absmax kernel failed: {}", error);
  return out;
}

at::Tensor dequantize_cuda(const Quant4Weight& w, at::ScalarType dtype) {
  const c10::cuda::CUDAGuard guard(w.codes.device());
  const at::Tensor absmax = block_absmax_cuda(w);
  const at::Tensor table = device_table(quant4_values(w.options.type).data(), 16, w.codes.device());
  at::Tensor out = at::empty(w.shape, w.codes.options().dtype(dtype));
  detail::Quant4CudaArgs args;
  args.codes = w.codes.data_ptr<std::uint8_t>();
  args.absmax = absmax.data_ptr<float>();
  args.values16 = table.data_ptr<float>();
  args.out = out.data_ptr();
  args.numel = w.numel(), args.blocksize = w.options.blocksize, args.bf16 = dtype == at::kBFloat16;
  const char* error = detail::quant4_dequantize_cuda(args, c10::cuda::getCurrentCUDAStream().stream());
  HPCTRAIN_CHECK(error == nullptr, "4-bit weight: the dequantization kernel failed: {}", error);
  return out;
}
#endif

}  // namespace

std::string to_string(Quant4Type type) { return type == Quant4Type::nf4 ? "nf4" : "fp4"; }

Quant4Type parse_quant4_type(const std::string& text, const std::string& option) {
  if (text == "nf4") return Quant4Type::nf4;
  if (text == "fp4") return Quant4Type::fp4;
  fail("{} '{}': expected nf4 or fp4", option, text);
}

void check_quant4_blocksize(int64_t blocksize) {
  const bool power_of_two = blocksize > 0 && (blocksize & (blocksize - 1)) == 0;
  HPCTRAIN_CHECK(power_of_two && blocksize >= 32 && blocksize <= 4096,
                 "--quant-blocksize {}: expected a power of two from 32 to 4096 (bitsandbytes' block sizes; QLoRA's is 64)",
                 blocksize);
}

const std::array<float, 16>& quant4_values(Quant4Type type) { return type == Quant4Type::nf4 ? kNf4Values : kFp4Values; }

int64_t Quant4Weight::numel() const {
  int64_t n = 1;
  for (int64_t size : shape) n *= size;
  return n;
}

int64_t Quant4Weight::bytes() const {
  int64_t total = 0;
  for (const at::Tensor* t : {&codes, &absmax, &absmax2, &offset})
    if (t->defined()) total += static_cast<int64_t>(t->nbytes());
  return total;
}

int64_t quant4_bytes(int64_t numel, const Quant4Options& options) {
  const int64_t blocks = (numel + options.blocksize - 1) / options.blocksize;
  const int64_t codes = (numel + 1) / 2;
  if (!options.double_quant) return codes + 4 * blocks;
  return codes + blocks + 4 * ((blocks + kNestedBlockSize - 1) / kNestedBlockSize) + 4;
}

Quant4Weight quantize_4bit(const at::Tensor& weight, const Quant4Options& options, const std::string& name) {
  check_quant4_blocksize(options.blocksize);
  HPCTRAIN_CHECK(weight.is_cpu() && at::isFloatingType(weight.scalar_type()),
                 "quantize_4bit: '{}' must be a floating CPU tensor, got {} {}", name, c10::toString(weight.scalar_type()),
                 weight.device().str());
  const at::Tensor x = weight.detach().to(at::kFloat).contiguous().reshape({-1});
  HPCTRAIN_CHECK(x.numel() > 0, "quantize_4bit: '{}' is empty", name);
  HPCTRAIN_CHECK(at::isfinite(x).all().item<bool>(), "quantize_4bit: '{}' holds NaN or infinite values: a 4-bit base "
                 "needs finite weights", name);
  Quant4Weight w;
  w.shape = weight.sizes().vec(), w.options = options;
  const int64_t n = x.numel(), blocks = w.blocks(), size = options.blocksize;
  at::Tensor unpacked = at::empty({n + 1}, x.options().dtype(at::kByte));  // one code per element (+ padding)
  at::Tensor absmax = at::empty({blocks}, x.options());
  const Quant4Quantizer& q = quantizer(options.type);
  const float* in = x.data_ptr<float>();
  std::uint8_t* codes = unpacked.data_ptr<std::uint8_t>();
  float* scales = absmax.data_ptr<float>();
  at::parallel_for(0, blocks, std::max<int64_t>(1, 16384 / size), [&](int64_t first, int64_t last) {
    for (int64_t b = first; b < last; ++b) {
      const int64_t start = b * size, len = std::min(size, n - start);
      scales[b] = quantize_block(q, in + start, len, len == size, codes + start);
    }
  });
  codes[n] = code_of(q, 0.0f);  // bitsandbytes pads an odd count with the code of 0
  w.codes = at::empty({(n + 1) / 2}, unpacked.options());
  std::uint8_t* packed = w.codes.data_ptr<std::uint8_t>();
  for (int64_t k = 0; k < (n + 1) / 2; ++k)
    packed[k] = static_cast<std::uint8_t>((codes[2 * k] << 4) | codes[2 * k + 1]);
  if (!options.double_quant) {
    w.absmax = absmax;
    return w;
  }
  w.offset = absmax.mean().reshape({1});  // torch's float32 mean, as bitsandbytes takes it
  const at::Tensor centered = (absmax - w.offset).contiguous();
  w.absmax = at::empty({blocks}, unpacked.options());
  w.absmax2 = at::empty({(blocks + kNestedBlockSize - 1) / kNestedBlockSize}, x.options());
  quantize_nested(centered.data_ptr<float>(), blocks, w.absmax.data_ptr<std::uint8_t>(), w.absmax2.data_ptr<float>());
  return w;
}

namespace {

// A nested CPU weight's absmax, dequantized (offset added) into values[b] for the blocks b asked for.
class NestedAbsmaxCpu {
 public:
  explicit NestedAbsmaxCpu(const Quant4Weight& w)
      : codes_(w.absmax.data_ptr<std::uint8_t>()), absmax2_(w.absmax2.data_ptr<float>()), offset_(w.offset.item<float>()) {}
  void fill(int64_t first, int64_t last, float* values) const {
    static const std::array<float, 256> map = core::dynamic_map(true);
    for (int64_t b = first; b < last; ++b) values[b] = detail::nested_absmax(map.data(), codes_, absmax2_, offset_, b);
  }

 private:
  const std::uint8_t* codes_;
  const float* absmax2_;
  float offset_;
};

}  // namespace

at::Tensor block_absmax(const Quant4Weight& w) {
  check_cpu_or_cuda(w);
#if HPCTRAIN_WITH_CUDA
  if (w.codes.is_cuda()) return block_absmax_cuda(w);
#endif
  if (!w.nested()) return w.absmax;
  at::Tensor out = at::empty({w.blocks()}, w.absmax2.options());
  NestedAbsmaxCpu(w).fill(0, w.blocks(), out.data_ptr<float>());
  return out;
}

namespace {

void check_dequantized_dtype(at::ScalarType dtype) {
  HPCTRAIN_CHECK(dtype == at::kFloat || dtype == at::kBFloat16, "dequantize_4bit: expected float32 or bfloat16, got {}",
                 c10::toString(dtype));
}

}  // namespace

detail::Quant4CpuArgs detail::quant4_cpu_args(const Quant4Weight& w, const at::Tensor& absmax, at::ScalarType dtype) {
  detail::Quant4CpuArgs a;
  a.codes = w.codes.data_ptr<std::uint8_t>();
  a.absmax = absmax.data_ptr<float>();
  a.values16 = quant4_values(w.options.type).data();
  a.blocksize = w.options.blocksize;
  a.bf16 = dtype == at::kBFloat16;
  return a;
}

at::Tensor dequantize_4bit(const Quant4Weight& w, at::ScalarType dtype) {
  check_cpu_or_cuda(w);
  check_dequantized_dtype(dtype);
#if HPCTRAIN_WITH_CUDA
  if (w.codes.is_cuda()) return dequantize_cuda(w, dtype);
#endif
  at::Tensor out = at::empty(w.shape, at::TensorOptions().dtype(dtype));
  dequantize_4bit_out(w, out);
  return out;
}

void dequantize_4bit_out(const Quant4Weight& w, const at::Tensor& out) {
  check_cpu_or_cuda(w);
  check_dequantized_dtype(out.scalar_type());
  HPCTRAIN_CHECK(w.codes.is_cpu() && out.is_cpu(), "dequantize_4bit_out: CPU tensors only, got codes on {} and out "
                 "on {}", w.codes.device().str(), out.device().str());
  HPCTRAIN_CHECK(out.is_contiguous() && out.numel() == w.numel(), "dequantize_4bit_out: expected a contiguous output of "
                 "{} elements, got {}", w.numel(), c10::str(out.sizes()));
  const at::Tensor absmax = block_absmax(w).contiguous();
  const detail::Quant4CpuArgs args = detail::quant4_cpu_args(w, absmax, out.scalar_type());
  const int64_t element_bytes = static_cast<int64_t>(out.element_size());
  auto* bytes = static_cast<char*>(out.data_ptr());
  const int64_t grain = 32 * std::max<int64_t>(1, 32768 / 32);
  at::parallel_for(0, w.numel(), grain, [&](int64_t first, int64_t last) {
    detail::quant4_dequantize_range(args, first, last, bytes + first * element_bytes);
  });
}

at::Tensor dequantize_4bit_rows(const Quant4Weight& w, const at::Tensor& rows, at::ScalarType dtype) {
  check_cpu_or_cuda(w);
  check_dequantized_dtype(dtype);
  HPCTRAIN_CHECK(w.shape.size() == 2, "dequantize_4bit_rows: expected a 2-d weight, got {} dimensions", w.shape.size());
  HPCTRAIN_CHECK(rows.scalar_type() == at::kLong || rows.scalar_type() == at::kInt, "dequantize_4bit_rows: expected "
                 "integer row indices, got {}", c10::toString(rows.scalar_type()));
  const int64_t count = w.shape[0], width = w.shape[1];
  std::vector<int64_t> shape = rows.sizes().vec();
  shape.push_back(width);
  if (!w.codes.is_cpu()) return dequantize_4bit(w, dtype).index_select(0, rows.reshape({-1})).view(shape);
  const at::Tensor index = rows.to(at::kCPU, at::kLong).contiguous().reshape({-1});
  const int64_t* ids = index.data_ptr<int64_t>();
  for (int64_t k = 0; k < index.numel(); ++k)
    HPCTRAIN_CHECK(ids[k] >= 0 && ids[k] < count, "dequantize_4bit_rows: row {} is outside [0, {})", ids[k], count);
  // The absmax of the looked-up rows' blocks only (a nested embedding's whole absmax is a pass over all its blocks).
  at::Tensor absmax = w.absmax.contiguous();
  if (w.nested() && width > 0) {
    absmax = at::empty({w.blocks()}, w.absmax2.options());
    const NestedAbsmaxCpu nested(w);
    for (int64_t k = 0; k < index.numel(); ++k)
      nested.fill(ids[k] * width / w.options.blocksize, ((ids[k] + 1) * width - 1) / w.options.blocksize + 1,
                  absmax.data_ptr<float>());
  }
  const detail::Quant4CpuArgs args = detail::quant4_cpu_args(w, absmax, dtype);
  at::Tensor out = at::empty({index.numel(), width}, at::TensorOptions().dtype(dtype));
  const int64_t row_bytes = width * static_cast<int64_t>(out.element_size());
  auto* bytes = static_cast<char*>(out.data_ptr());
  at::parallel_for(0, index.numel(), std::max<int64_t>(1, 32768 / width), [&](int64_t first, int64_t last) {
    for (int64_t k = first; k < last; ++k)
      detail::quant4_dequantize_range(args, ids[k] * width, (ids[k] + 1) * width, bytes + k * row_bytes);
  });
  return out.view(shape).to(rows.device());
}

}  // namespace hpctrain::models
