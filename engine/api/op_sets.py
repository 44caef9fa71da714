"""The PyTorch op names the audit allows, tells apart or counts, by name only.

Torch-free, so that the cost model (engine side) can read them without importing torch.
"""

# Allocation, views, copies and metadata: what a launcher may do with PyTorch.
ALLOWED_OPS = {
    "empty",
    "empty_like",
    "empty_strided",
    "new_empty",
    "new_empty_strided",
    "zeros",
    "zeros_like",
    "new_zeros",
    "ones",
    "ones_like",
    "new_ones",
    "full",
    "full_like",
    "new_full",
    "fill_",
    "zero_",
    "arange",
    "view",
    "_unsafe_view",
    "reshape",
    "_reshape_alias",
    "as_strided",
    "expand",
    "permute",
    "transpose",
    "t",
    "unsqueeze",
    "squeeze",
    "select",
    "slice",
    "split",
    "split_with_sizes",
    "chunk",
    "narrow",
    "unbind",
    "contiguous",
    "clone",
    "copy_",
    "_to_copy",
    "to",
    "detach",
    "alias",
    "lift_fresh",
    "view_as",
    "flatten",
    "unflatten",
    "resize_",
    "set_",
    "stride",
    "size",
    "sym_size",
    "sym_stride",
    "sym_numel",
    "is_contiguous",
    "_local_scalar_dense",
    "expand_as",
    "movedim",
    "_unsafe_view",
    "dim",
    "numel",
}

ALLOCATION_OPS = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided"}

# Comparisons and logic, allowed on scalars only: a launcher's checks (`target.max() >= n`
# combined with `|`, then asserted). A boolean scalar cannot carry a kernel's result.
CHECK_OPS = {
    "eq",
    "ne",
    "lt",
    "le",
    "gt",
    "ge",
    "logical_and",
    "logical_or",
    "logical_not",
    "logical_xor",
    "bitwise_and",
    "bitwise_or",
    "bitwise_not",
    "bitwise_xor",
    "_assert_async",
}

# Host-side ops that move device memory: fills write their output, copies also read it.
FILL_OPS = {
    "zeros",
    "zeros_like",
    "new_zeros",
    "ones",
    "ones_like",
    "new_ones",
    "full",
    "full_like",
    "new_full",
    "fill_",
    "zero_",
}

COPY_OPS = {"clone", "copy_", "_to_copy", "contiguous"}
