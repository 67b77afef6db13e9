"""torch.autocast's policy for the ops precred mirrors.

Inside an autocast region, torch runs some reductions in fp32 whatever their 16-bit input
(aten/src/ATen/autocast_mode.h): AT_FORALL_FP32_SET_OPT_DTYPE runs the op with dtype=float32 when the
call gives no dtype; AT_FORALL_FP32 casts the inputs to fp32. precred follows it, so that its functions
and modules give the dtypes torch's give in a mixed-precision model:
- OUTPUT_FP32 (sum, prod, softmax, log_softmax as torch's dtype=float32): precred reads the 16-bit input
  as it is -- its accumulators are fp32 or wider -- and writes fp32: the values an fp32 copy would
  give, without the copy;
- INPUTS_FP32 (layer_norm, logsumexp): x, weight and bias are cast to fp32 (differentiably), as torch's.
Eligible inputs, as torch's: fp16 and bf16 (an fp32 input is there already; fp64 is never cast). An
explicit dtype= and calls outside an autocast region for the input's device are left alone. The lists
are per device type, as torch's: on the CPU only prod.
"""
import torch

OUTPUT_FP32 = "output fp32"
INPUTS_FP32 = "inputs fp32"

POLICIES = {
    # torch 2.11 on an H100 (tests/test_autocast.py): logsumexp fp32, rms_norm left 16-bit
    "cuda": {"sum": OUTPUT_FP32, "prod": OUTPUT_FP32, "softmax": OUTPUT_FP32, "log_softmax": OUTPUT_FP32,
             "layer_norm": INPUTS_FP32, "logsumexp": INPUTS_FP32},
    "cpu": {"prod": OUTPUT_FP32},
}

_SIXTEEN_BIT = (torch.float16, torch.bfloat16)


def runs_in_fp32(op: str, x) -> bool:
    """Whether torch.autocast, enabled for x's device, runs `op` on x in fp32 (POLICIES); the dtype
    test first: fp32 and fp64 calls pay nothing more."""
    if getattr(x, "dtype", None) not in _SIXTEEN_BIT:
        return False
    device_type = x.device.type
    return op in POLICIES.get(device_type, ()) and torch.is_autocast_enabled(device_type)


def output_dtype(op: str, x, dtype):
    """The dtype an OUTPUT_FP32 op runs with: torch.float32 where autocast runs it in fp32 on x and the
    call gave no dtype; else the call's dtype (None included)."""
    return torch.float32 if dtype is None and runs_in_fp32(op, x) else dtype


def fp32_if_sixteen_bit(t):
    """t cast to fp32 where it is an fp16 / bf16 tensor (autocast's cast: differentiable); else t."""
    return t.float() if t is not None and t.dtype in _SIXTEEN_BIT else t
