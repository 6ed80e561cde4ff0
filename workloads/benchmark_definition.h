// The benchmark definition's version: what a configuration and seed produce, beyond what the
// resolved configuration names. Every run stores it in its resolved configuration
// (`benchmark_definition`); runs stored before it existed carry none and count as version 1.
// The gate does not compare exact or modelled figures across versions: it asks for a new
// baseline instead (baselines/run_comparison.h).
#pragma once

namespace kvbench {

// Bump it with any change that moves exact or modelled figures for an unchanged configuration
// and seed: the synthetic generator's statistics, a workload script's operations or prompts,
// the engine's numerics (quantizers, kernels' rounding, selection, accounting of bytes, pages or
// op counts) or a model backend's forward pass, and any change to a built-in suite that moves
// its exact or modelled figures (a baseline of that suite must then be set again). A change that
// moves only host timings does not. The versions and what each moved: docs/gate.md.
inline constexpr int kBenchmarkDefinition = 10;

}  // namespace kvbench
