// Random GPU samples for the tests of what packs them (timeline/gpu_window.h,
// store/gpu_sample_log.h), and a comparison bit for bit.
#pragma once

#include <cstring>
#include <random>
#include <string>
#include <type_traits>

#include "schema/record.h"

namespace runlens::testing {

template <class V>
void assign(V* field, double v) {
  if constexpr (std::is_arithmetic_v<V>) *field = static_cast<V>(v);
}

// A sample with a random set of the optional fields (node and gpu always),
// random values in them, and the defaults elsewhere, as a decoded row has.
inline Gpu random_gpu(std::mt19937_64& rng, int mode) {
  Gpu g;
  g.node = Symbol::intern("node-" + std::to_string(rng() % 50));
  g.gpu = static_cast<int32_t>(rng() % 8);
  g.set_present(Gpu::F::node);
  g.set_present(Gpu::F::gpu);
  std::uniform_real_distribution<double> real(-1e12, 1e12);
  auto want = [&](Gpu::F) { return mode == 1 || (mode == 2 && rng() % 2 == 0); };
#define SET_(T, name, Camel, req)                                                          \
  if (Gpu::F::name != Gpu::F::node && Gpu::F::name != Gpu::F::gpu && want(Gpu::F::name)) { \
    g.set_present(Gpu::F::name);                                                           \
    assign(&g.name, real(rng));                                                            \
  }
  RUNLENS_GPU_FIELDS(SET_)
#undef SET_
  return g;
}

// Bit for bit (NaN included), field by field.
inline bool same(const Gpu& a, const Gpu& b) {
  bool eq = a.present == b.present;
#define CMP_(T, name, Camel, req) eq = eq && std::memcmp(&a.name, &b.name, sizeof a.name) == 0;
  RUNLENS_GPU_FIELDS(CMP_)
#undef CMP_
  return eq;
}

}  // namespace runlens::testing
