"""Known gaps of the OpInfo cells: cell id -> reason. Each entry is a strict xfail (the
cell must fail; a fix that makes it pass must remove the entry)."""

from __future__ import annotations

_SDPA_DROPOUT = (
    "dropout_p=0.5: eager applies dropout (the OpInfo fixes the seed) but the lowering's "
    "sdpa decomposition drops dropout (inference semantics), so the compiled result is "
    "attention without dropout; needs sdpa with dropout_p > 0 kept in PyTorch by lowering")
_FLASH_LSE = (
    "torch's decomposition of _scaled_dot_product_flash_attention_for_cpu returns the "
    "attention weights (L x S) where the op returns logsumexp (L); output 0 is right")
_SOFT_MARGIN_FP16 = (
    "eager fp16 overflows (exp in fp16 -> inf) where float64 is finite; the compiled result "
    "(computed in fp32 by the decomposition) is finite and close to float64, but the float64 "
    "rule requires the compiled result to overflow where eager does")

_MHA_DROPOUT = (
    "training=True, dropout_p=0.5: eager applies dropout (the OpInfo fixes the seed) but "
    "lowering removes aten.dropout (inference semantics), so the compiled result has no "
    "dropout; needs dropout with train=True kept in PyTorch by lowering")

XFAIL: dict[str, str] = {
    **{f"nn.functional.multi_head_attention_forward-{d}-s{i}": _MHA_DROPOUT
       for d in ("fp32", "fp16", "bf16") for i in (1, 3, 5)},
    **{f"nn.functional.scaled_dot_product_attention-{d}-s{i}": _SDPA_DROPOUT
       for d in ("fp32", "fp16", "bf16") for i in (2, 3)},
    **{f"torch.ops.aten._scaled_dot_product_flash_attention_for_cpu-{d}-s{i}": _FLASH_LSE
       for d in ("fp32", "fp16", "bf16") for i in (0, 1, 2)},
    **{f"nn.functional.soft_margin_loss-fp16-s{i}": _SOFT_MARGIN_FP16 for i in (1, 2, 3, 4, 5)},
}
