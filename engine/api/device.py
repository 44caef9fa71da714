"""The target GPU's hardware limits: an H200 (sm_90), the architecture every ahead-of-time
compile targets. Defined once, read by the compiled view (occupancy, shared memory a launch may
use), the dry run's stand-in for the device and the cost model."""

from __future__ import annotations

SMS = 132  # streaming multiprocessors (datasheet)
MAX_WARPS_PER_SM = 64  # resident warps an SM
MAX_BLOCKS_PER_SM = 32  # resident programs an SM
REGS_PER_SM = 65536  # 32-bit registers an SM
SMEM_PER_SM = 228 * 1024  # shared memory an SM
# The most shared memory one program may use (the opt-in limit a block): a launch that needs
# more fails with OutOfResources when the GPU loads it.
SMEM_PER_PROGRAM = 227 * 1024
