"""Test shapes for the CUDA sm_90a backend.

CONFIG_SHAPES must make gemm/cuda/gemm_heuristics.h pick every row of kTileConfigs at least once
(test_cuda_heuristics.py checks that on the CPU, no GPU needed), stream-K plans with and without
whole waves, and K splits over clusters, so the GPU tests run every kernel instantiation and schedule
the package ships. Values are (m, n, k) for an H200 (132 SMs).
"""

H200_SMS = 132

CONFIG_SHAPES = [
    (64, 2112, 7168),  # K split over 2-CTA clusters
    (64, 576, 7168),  # K split over 4-CTA clusters
    (64, 24576, 1536),
    (64, 32768, 512),
    (128, 2112, 7168),
    (128, 7168, 2048),
    (128, 4096, 7168),
    (128, 24576, 1536),
    (1024, 1536, 7168),
    (1024, 4096, 512),
    (4096, 2112, 7168),
    (4096, 7168, 2048),
    (6144, 4096, 512),
    (1024, 576, 7168),
    (4096, 7168, 16384),  # whole waves of 192x128 tiles plus a stream-K region of 44 tiles
    (6144, 576, 7168),  # 256x128 (two slabs a warpgroup): 120 tiles, one wave
    (4096, 4096, 7168),  # 256x128: 512 tiles, 3.9 waves
    (2048, 5120, 7168),  # 128x128 tiles in 2-CTA clusters (A multicast)
]

# Ragged shapes: M, N, K not multiples of the tiles or of 128, K % 16 != 0 (repack path).
RAGGED_SHAPES = [
    (1, 8, 16),
    (7, 192, 7168),
    (83, 576, 3884),
    (129, 320, 1152),
    (300, 2112, 1000),
    (1030, 8224, 576),
    # Long K: paired loads (two K blocks a TMA instruction) up to the last whole K block, then the partial
    # one alone; ragged M and N in the 3-D boxes. 64x64 tiles, and the 128x128 paired twin with and
    # without the K-major repack (K % 16 != 0).
    (120, 3000, 7056),
    (1030, 1500, 7056),
    (900, 1536, 7100),
]

# Shapes whose plans use 128+-row tiles, whose A scales TMA loads in place if M-major with 16-byte
# aligned columns, and otherwise: gathered by the scale warp (few K blocks a CTA), or transposed by a
# kernel before the GEMM. test_cuda_heuristics.py checks that the plans stay so.
SCALE_PATH_SHAPES = {"gathered": (1024, 1536, 1152), "transposed": (1024, 1536, 7168)}
