"""The TensorRT executor: deserializes a plan and runs it with an execution context on the
current torch CUDA stream (output allocator for data-dependent shapes)."""

from __future__ import annotations

from functools import lru_cache

import torch

from .._trt import IS_RTX, make_logger, to_torch_dtype, trt

# TensorRT for RTX engines run on these compute capabilities (not on 9.0, H100/H200).
RTX_COMPUTE_CAPABILITIES = {(8, 0), (8, 6), (8, 9), (12, 0), (12, 1)}


@lru_cache(maxsize=1)
def tensorrt_unavailable_reason() -> str | None:
    """None when engines can run on this machine's GPU, else why not."""
    if not torch.cuda.is_available():
        return "no CUDA GPU is visible to torch"
    cc = torch.cuda.get_device_capability()
    if IS_RTX and cc not in RTX_COMPUTE_CAPABILITIES and cc[0] != 12:
        return (f"TensorRT for RTX engines do not run on compute capability {cc[0]}.{cc[1]} "
                f"(supported: {sorted(RTX_COMPUTE_CAPABILITIES)})")
    return None


class _OutputAllocator(trt.IOutputAllocator):
    """Allocates data-dependent outputs as torch tensors when TensorRT knows their size."""

    def __init__(self):
        super().__init__()
        self.buffers: dict[str, torch.Tensor] = {}
        self.shapes: dict[str, tuple[int, ...]] = {}
        self.dtypes: dict[str, torch.dtype] = {}

    def reallocate_output_async(self, name, memory, size, alignment, stream=None):
        buffer = torch.empty(max(size, 1), dtype=torch.uint8, device="cuda")
        self.buffers[name] = buffer
        return buffer.data_ptr()

    def notify_shape(self, name, shape):
        self.shapes[name] = tuple(shape)


class TensorRTExecutor:
    """Runs a serialized engine through the TensorRT runtime API."""

    def __init__(self, plan: bytes, output_allocator: bool = False):
        reason = tensorrt_unavailable_reason()
        if reason is not None:
            raise RuntimeError(f"executor='tensorrt' cannot run here: {reason}; "
                               "use executor='reference' or 'auto'")
        self.runtime = trt.Runtime(make_logger())
        self.engine = self.runtime.deserialize_cuda_engine(plan)
        if self.engine is None:
            raise RuntimeError("TensorRT could not deserialize the engine on this GPU")
        self.context = self.engine.create_execution_context()
        names = [self.engine.get_tensor_name(i) for i in range(self.engine.num_io_tensors)]
        self.input_names = [n for n in names
                            if self.engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT]
        self.output_names = [n for n in names
                             if self.engine.get_tensor_mode(n) == trt.TensorIOMode.OUTPUT]
        self.allocator = _OutputAllocator() if output_allocator else None

    def __call__(self, inputs: dict[str, torch.Tensor], profile: int = 0) -> list[torch.Tensor]:
        ctx = self.context
        if self.engine.num_optimization_profiles > 1 and ctx.active_optimization_profile != profile:
            ctx.set_optimization_profile_async(profile, torch.cuda.current_stream().cuda_stream)
        keep = []
        for name in self.input_names:
            tensor = inputs[name].cuda().contiguous()
            keep.append(tensor)
            ctx.set_input_shape(name, tuple(tensor.shape))
            ctx.set_tensor_address(name, tensor.data_ptr())
        outputs = {}
        for name in self.output_names:
            dtype = to_torch_dtype(self.engine.get_tensor_dtype(name))
            if self.allocator is not None:
                ctx.set_output_allocator(name, self.allocator)
                self.allocator.dtypes[name] = dtype
                continue
            out = torch.empty(tuple(ctx.get_tensor_shape(name)), dtype=dtype, device="cuda")
            ctx.set_tensor_address(name, out.data_ptr())
            outputs[name] = out
        stream = torch.cuda.current_stream()
        if not ctx.execute_async_v3(stream.cuda_stream):
            raise RuntimeError("TensorRT execution failed")
        if self.allocator is not None:
            stream.synchronize()
            for name in self.output_names:
                shape = self.allocator.shapes[name]
                dtype = self.allocator.dtypes[name]
                count = 1
                for d in shape:
                    count *= d
                raw = self.allocator.buffers[name]
                outputs[name] = raw[: count * dtype.itemsize].view(dtype).reshape(shape)
        return [outputs[n] for n in self.output_names]
