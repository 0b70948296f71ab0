// gemm_dump OUT: writes at::mm of two fixed fp32 matrices (256 x 320 times 320 x 192, seeded) to OUT as raw
// float32, then prints the core OpenBLAS used. test_kernels_agree.sh runs it under two OPENBLAS_CORETYPEs.
#include <ATen/ATen.h>
#include <dlfcn.h>

#include <cstdio>
#include <fstream>

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  at::manual_seed(3);
  const at::Tensor a = at::randn({256, 320}), b = at::randn({320, 192});
  const at::Tensor c = at::mm(a, b).contiguous();
  std::ofstream(argv[1], std::ios::binary).write(static_cast<const char*>(c.data_ptr()), static_cast<std::streamsize>(c.nbytes()));
  using CoreName = char* (*)();
  auto* get = reinterpret_cast<CoreName>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  std::printf("core %s\n", get != nullptr ? get() : "(not OpenBLAS)");
  return 0;
}
