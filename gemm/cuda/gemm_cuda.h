// CUDA-backend entry points below gemm::gemm_launch, for tests that force a plan (every tile
// config and split count) instead of the one the heuristic picks.
#pragma once

#include <string>

#include "../gemm_contract.h"
#include "gemm_heuristics.h"

namespace gemm::cuda {

// The SMs and 2-CTA cluster slots of device `device` (cached); an error message, or empty.
std::string gpu_slots(int device, GpuSlots& slots);

// Runs `plan` (from make_plan / choose_plan for these args' m, n, k) on `stream`.
std::string launch_with_plan(const GemmArgs& args, const Workspace& workspace, void* stream,
                             const Plan& plan);

}  // namespace gemm::cuda
