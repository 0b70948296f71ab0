// HPCTRAIN_VECTOR_CLONES: compile a loop for AVX2 and for the baseline; the loader picks the clone the CPU
// runs. Only for loops whose results do not depend on the vector width (exact IEEE operations, no FMA
// contraction: Note [Fused AdamW], Note [Quantizer thresholds]). Other compilers and architectures get the
// baseline.
#pragma once

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define HPCTRAIN_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define HPCTRAIN_VECTOR_CLONES
#endif
