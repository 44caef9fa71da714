"""Values crossing between the judge and a candidate's runner (worker side; imports torch).

The judge sends a case's arguments to the runner; the runner sends back what the candidate
returned and the arguments as the call left them. Both directions use these plain msgspec
structs — dtype, shape, strides and raw bytes — never pickle: decoding a runner's answer can
build tensors and numbers, nothing else, and every size is checked against the bytes given.

A tensor travels as the storage span its strides cover, so a strided or column-major view
arrives with the same layout (the edge stage checks those layouts on purpose).
"""

from __future__ import annotations

import torch

from ..protocol import NumValue, SeqValue, TensorValue, Value

DTYPES = {
    str(d).removeprefix("torch."): d
    for d in (
        torch.float64,
        torch.float32,
        torch.float16,
        torch.bfloat16,
        torch.int64,
        torch.int32,
        torch.int16,
        torch.int8,
        torch.uint8,
        torch.bool,
    )
}
MAX_DEPTH = 8


class WireError(ValueError):
    """A value that cannot be sent, or bytes that do not describe the value they claim."""


def _span(shape, stride) -> int:
    if any(s == 0 for s in shape):
        return 0
    return 1 + sum((s - 1) * st for s, st in zip(shape, stride))


def encode(value, depth: int = 0) -> Value:
    if depth > MAX_DEPTH:
        raise WireError("nested too deeply")
    if isinstance(value, torch.Tensor):
        name = str(value.dtype).removeprefix("torch.")
        if name not in DTYPES:
            raise WireError(f"a tensor of dtype {name}")
        if value.is_sparse or value.layout != torch.strided:
            raise WireError("a tensor that is not strided")
        t = value.detach()
        shape, stride = list(t.shape), list(t.stride())
        n = _span(shape, stride)
        flat = t.as_strided((n,), (1,)).cpu().contiguous() if n else t.new_empty(0).cpu()
        # a view of the host copy (it keeps the copy alive): the encoder copies it once, into
        # the message
        data = memoryview(flat.view(torch.uint8).numpy()) if n else memoryview(b"")
        return TensorValue(name, shape, stride, data, t.device.type, bool(value.requires_grad))
    if isinstance(value, (tuple, list)):
        return SeqValue([encode(v, depth + 1) for v in value], isinstance(value, tuple))
    if value is None or isinstance(value, (bool, int, float, str)):
        return NumValue(value)
    raise WireError(f"a value of type {type(value).__name__}")


def decode(value: Value, device: str | None = None, depth: int = 0):
    if depth > MAX_DEPTH:
        raise WireError("nested too deeply")
    if isinstance(value, TensorValue):
        dtype = DTYPES.get(value.dtype)
        if dtype is None:
            raise WireError(f"unknown dtype {value.dtype!r}")
        if len(value.shape) != len(value.stride) or any(s < 0 for s in value.shape + value.stride):
            raise WireError("a shape and strides that do not fit")
        n = _span(value.shape, value.stride)
        size = torch.empty((), dtype=dtype).element_size()
        got = memoryview(value.data).nbytes
        if got != n * size:
            raise WireError(f"{got} bytes for {n} elements of {value.dtype}")
        if not n:
            t = torch.empty(value.shape, dtype=dtype, device=device or value.device)
        else:
            # A view of the message's bytes (which sit at any alignment in it): the device gets
            # its own copy as one block, the CPU an aligned copy, then the same strided view.
            raw = torch.frombuffer(_writable(value.data), dtype=torch.uint8)
            target = device or value.device
            raw = raw.to(target) if target != "cpu" else raw.clone()
            t = raw.view(dtype).as_strided(value.shape, value.stride)
        if value.requires_grad and t.is_floating_point():
            t = t.detach().requires_grad_(True)
        return t
    if isinstance(value, SeqValue):
        items = [decode(v, device, depth + 1) for v in value.items]
        return tuple(items) if value.tuple else items
    if isinstance(value, NumValue):
        return value.value
    raise WireError(f"unexpected {type(value).__name__}")


def _writable(data) -> memoryview | bytearray:
    """The bytes as a writable buffer, without a copy where they already are one (a view into
    the message read from the pipe): a tensor over a read-only buffer is undefined behaviour
    once anything writes to it."""
    view = memoryview(data)
    return view if not view.readonly else bytearray(view)


def nbytes(value: Value) -> int:
    if isinstance(value, TensorValue):
        return memoryview(value.data).nbytes
    if isinstance(value, SeqValue):
        return sum(nbytes(v) for v in value.items)
    return 0
