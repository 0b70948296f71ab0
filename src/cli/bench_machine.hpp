// Private to the bench commands: the brief machine header every benchmark prints (defined in bench_command.cpp).
#pragma once

#include <nlohmann/json.hpp>

namespace hpctrain::cli {

// {"cpu": model name, "cpu_flags": the training-relevant flags present, "openblas_core": the kernels in use}
nlohmann::json bench_machine_json();
// "# CPU: ...; flags; OpenBLAS kernels ..." on stdout.
void print_bench_machine(const nlohmann::json& machine);

}  // namespace hpctrain::cli
