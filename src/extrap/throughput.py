"""Training throughput: the FLOPs of one trained token, model FLOPs utilisation (MFU), fused AdamW, compile.

MFU (Chowdhery et al. 2022, "PaLM", Appendix B) is the throughput the model's own arithmetic implies, as a
fraction of the card's peak: tokens/s x FLOPs per token / peak FLOP/s.  Per token, training costs
6 N + 12 R d L FLOPs: 6 N for the forward (2 N) and backward (4 N) matrix products of the N parameters that
multiply activations (Kaplan et al. 2020, "Scaling Laws for Neural Language Models", §2.1: C ≈ 6 N), and
12 R d L for the attention scores and values of R layers of width d over L tokens, forward and backward,
counted over all L keys as PaLM counts them (causal attention does about half of that work).  Peak: the
dense bf16 tensor-core rate of known cards from their datasheets; another card, or a CPU, gives no MFU.
"""

from __future__ import annotations

import torch

from extrap.errors import ExtrapError

# Dense (not 2:4 sparse) bf16 FLOP/s, by a part of torch.cuda.get_device_name(): NVIDIA's datasheets.
PEAK_BF16 = (
    ("H100 80GB HBM3", 989.4e12),  # H100 SXM5
    ("H100 SXM", 989.4e12),
    ("H200", 989.4e12),
    ("A100", 312e12),
)


def matmul_params(model: torch.nn.Module) -> int:
    """N: the parameters of the model's linear layers (a tied head counted once), the ones each token
    multiplies; embedding tables are looked up, not multiplied, and a scheme's bias parameters are negligible."""
    seen = {id(p): p.numel() for m in model.modules() if isinstance(m, torch.nn.Linear) for p in m.parameters()}
    return sum(seen.values())


def training_flops_per_token(params: int, n_layer: int, d_model: int, length: int) -> float:
    """6 N + 12 R d L: PaLM Appendix B's FLOPs of one trained token (forward and backward)."""
    return 6.0 * params + 12.0 * n_layer * d_model * length


def peak_flops(device) -> float | None:
    """The dense bf16 peak of ``device`` (None: a CPU or a card not in :data:`PEAK_BF16`)."""
    device = torch.device(device)
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((peak for part, peak in PEAK_BF16 if part in name), None)


def mfu(tokens_per_s: float, flops_per_token: float, peak: float | None) -> float | None:
    """Model FLOPs utilisation: tokens/s x FLOPs per token / peak (None without a known peak)."""
    return None if peak is None else tokens_per_s * flops_per_token / peak


def fused_adamw(device) -> bool:
    """Whether AdamW runs its fused kernel: on CUDA (one kernel per step for every parameter); elsewhere the
    single-tensor loop, whose results the CPU tests and resumes are written against."""
    return torch.device(device).type == "cuda"


def check_compile(device) -> None:
    """``--compile`` needs a CUDA device: torch.compile's inductor on a CPU compiles for minutes on the small
    models extrap trains there, longer than their training."""
    if torch.device(device).type != "cuda":
        raise ExtrapError(f"--compile: CUDA only (this run trains on {device}); train without it")


def compile_blocks(model) -> None:
    """torch.compile each transformer block in place (the layer loop and the head stay eager): every block
    has one shape, so one compiled graph serves them all, and the embedding's data-dependent positions stay out."""
    for blk in model.blocks:
        blk.compile(dynamic=False)
