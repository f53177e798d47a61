// The CUDA launcher's entry points below gemm::gemm_launch, for tools that run a plan of their choice
// (the tuner, scripts/cuda/tune.py, forces every tile config, stream-K and K split) instead of the one
// choose_plan() picks.
#pragma once

#include <string>

#include "../gemm_contract.h"
#include "planner.h"

namespace gemm::cuda {

// The SMs and cluster slots of device `device` (cached); an error message, or empty.
std::string gpu_slots(int device, GpuSlots& slots);

// Runs `plan` (from make_plan / choose_plan for these args' m, n, k) on `stream`.
std::string launch_with_plan(const GemmArgs& args, const Workspace& workspace, void* stream,
                             const Plan& plan);

}  // namespace gemm::cuda
