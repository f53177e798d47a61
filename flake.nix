{
  description = "gemm: FP8 block-scaled matmul (DeepSeek-V3 recipe) for ROCm gfx942, CUDA sm_90a and CPU";

  inputs = {
    kernel-builder.url = "github:huggingface/kernels";
  };

  outputs =
    { self, kernel-builder }:
    kernel-builder.lib.genKernelFlakeOutputs {
      inherit self;
      path = ./.;
    };
}
