"""Position-id samplers for training: randomized positions and PoSE.

They choose *which* position ids a training window gets; the positional scheme
(rope, sinusoidal, a bias RPE, ...) then encodes them as usual.  So they are not
registry schemes: the model config has a separate field ``positions`` whose value
is a sampler spec, parsed by :meth:`PositionSampler.from_spec`:

* ``contiguous`` -- 0..L-1 (the default).
* ``randomized:max=M`` -- Ruoss et al. (2023).
* ``pose:target=T,chunks=N`` -- Zhu et al. (2023).

Evaluation always uses 0..L-1 (:meth:`PositionSampler.eval_positions`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from extrap.errors import ExtrapError

if TYPE_CHECKING:  # torch is imported where it is used: parsing a sampler spec needs no torch
    import torch
    from torch import Tensor


def _check(batch: int, length: int) -> None:
    if batch <= 0 or length <= 0:
        raise ExtrapError(f"batch and length must be positive, got batch={batch}, length={length}")


def randomized_positions(
    batch: int, length: int, max_length: int, generator: torch.Generator | None = None, device=None
) -> Tensor:
    """Randomized positional encodings (Ruoss et al. 2023, §3).

    Each sequence gets ``length`` distinct positions drawn uniformly without
    replacement from {0, ..., max_length-1}, sorted increasingly: a uniformly random
    ordered subset, so every position up to max_length is trained.

    Args:
        batch, length: B and L (L <= max_length).
        max_length: M, the largest length to be seen at test time.
        generator: random source (its device is used unless ``device`` is given).

    Returns:
        (B, L) long, strictly increasing along L, in [0, M).
    """
    _check(batch, length)
    if length > max_length:
        raise ExtrapError(f"randomized positions: length {length} exceeds max={max_length}")
    import torch

    from extrap.devices import sampling_device

    dev = sampling_device(generator, device)
    # the L smallest of M i.i.d. uniform keys index a uniformly random L-subset
    keys = torch.rand(batch, max_length, generator=generator, device=dev)
    subset = keys.topk(length, dim=-1, largest=False).indices
    return subset.sort(dim=-1).values


def _uniform_int(lo: Tensor, hi: Tensor, generator, dev) -> Tensor:
    """One integer uniform on {lo, ..., hi} per entry (lo <= hi, long tensors)."""
    import torch

    u = torch.rand(lo.shape, generator=generator, device=dev, dtype=torch.float64)
    return lo + torch.minimum((u * (hi - lo + 1).double()).long(), hi - lo)


def pose_positions(
    batch: int,
    length: int,
    target_length: int,
    num_chunks: int = 2,
    generator: torch.Generator | None = None,
    device=None,
) -> Tensor:
    """PoSE: positional skip-wise training (Zhu et al. 2023, §3.2).

    The window of L tokens is cut into N contiguous chunks c_0..c_{N-1} of random
    positive lengths l_i (the N-1 cut points are a uniform random subset of
    {1..L-1}).  Chunk i gets positions st_i, ..., st_i + l_i - 1 with
    st_i = Σ_{j<i} l_j + u_i: contiguous inside a chunk, and a skip of
    u_i - u_{i-1} >= 0 before it.  The skip biases follow the paper:
    u_0 = 0 and u_i ~ U{u_{i-1}, ..., T - L} (T = target_length), so they are
    non-decreasing and the last position L - 1 + u_{N-1} <= T - 1.

    (The authors' code for N = 2 draws l_0 from {1..ceil(L/2)} instead of
    {1..L-1}; the position coverage is the same.)

    Args:
        batch, length: B and L.
        target_length: T >= L, the context length to adapt to.
        num_chunks: N, 1 <= N <= L (N = 1 is a single random shift).
        generator: random source (its device is used unless ``device`` is given).

    Returns:
        (B, L) long, strictly increasing along L, in [0, T).
    """
    _check(batch, length)
    if target_length < length:
        raise ExtrapError(f"PoSE: target={target_length} is shorter than the training length {length}")
    if not 1 <= num_chunks <= length:
        raise ExtrapError(f"PoSE: chunks must be in [1, {length}], got {num_chunks}")
    import torch

    from extrap.devices import sampling_device

    dev = sampling_device(generator, device)
    # chunk boundaries: N-1 distinct cut points in 1..L-1 -> chunk index of every token
    if num_chunks > 1:
        keys = torch.rand(batch, length - 1, generator=generator, device=dev)
        cuts = keys.topk(num_chunks - 1, dim=-1, largest=False).indices + 1  # (B, N-1) in 1..L-1
        starts = torch.zeros(batch, length, dtype=torch.long, device=dev)
        starts.scatter_(1, cuts, 1)
        chunk = starts.cumsum(-1)  # (B, L): 0 for c_0, 1 for c_1, ...
    else:
        chunk = torch.zeros(batch, length, dtype=torch.long, device=dev)
    # skip biases: u_0 = 0, u_i ~ U{u_{i-1}, ..., T - L}   (Zhu et al. 2023, §3.2)
    room = torch.full((batch,), target_length - length, dtype=torch.long, device=dev)
    u = [torch.zeros(batch, dtype=torch.long, device=dev)]
    for _ in range(1, num_chunks):
        u.append(_uniform_int(u[-1], room, generator, dev))
    u = torch.stack(u, dim=-1)  # (B, N), non-decreasing
    return torch.arange(length, device=dev) + u.gather(1, chunk)


@dataclass(frozen=True)
class PositionSampler:
    """Training position ids from a spec: ``contiguous``, ``randomized:max=M`` or ``pose:target=T,chunks=N``.

    Works with any positional scheme that consumes position ids (rope, xpos,
    sinusoidal, learned within its table, and bias RPEs through i - j).
    """

    kind: str = "contiguous"
    max_length: int | None = None  # randomized: M
    target_length: int | None = None  # pose: T
    num_chunks: int = 2  # pose: N

    KINDS = ("contiguous", "randomized", "pose")

    @classmethod
    def from_spec(cls, text: str | None) -> PositionSampler:
        """Parse ``contiguous`` | ``randomized:max=M`` | ``pose:target=T[,chunks=N]``."""
        if text is None or not str(text).strip():
            return cls()
        name, _, rest = str(text).strip().partition(":")
        name = name.strip()
        if name not in cls.KINDS:
            raise ExtrapError(f"unknown position sampler '{name}' (choose from {', '.join(cls.KINDS)})")
        allowed = {
            "contiguous": {},
            "randomized": {"max": "max_length"},
            "pose": {"target": "target_length", "chunks": "num_chunks"},
        }[name]
        kw: dict[str, int] = {}
        for part in filter(None, (p.strip() for p in rest.split(","))):
            key, eq, value = (s.strip() for s in part.partition("="))
            if not eq or key not in allowed:
                opts = ", ".join(f"{k}=..." for k in allowed) or "none"
                raise ExtrapError(f"position sampler {name}: bad option {part!r} (options: {opts})")
            try:
                f = float(value)
                if not f.is_integer():
                    raise ValueError
            except ValueError:
                raise ExtrapError(f"position sampler {name}: {key}={value!r} is not an integer") from None
            kw[allowed[key]] = int(f)
        return cls(kind=name, **kw)

    def __post_init__(self):
        if self.kind not in self.KINDS:
            raise ExtrapError(f"unknown position sampler '{self.kind}' (choose from {', '.join(self.KINDS)})")
        if self.kind == "randomized" and (self.max_length is None or self.max_length <= 0):
            raise ExtrapError("position sampler randomized needs max=M (the longest length to support), M > 0")
        if self.kind == "pose":
            if self.target_length is None or self.target_length <= 0:
                raise ExtrapError("position sampler pose needs target=T (the context length to reach), T > 0")
            if self.num_chunks < 1:
                raise ExtrapError(f"position sampler pose: chunks must be >= 1, got {self.num_chunks}")

    @property
    def spec(self) -> str:
        """Canonical spec string; ``from_spec(s.spec) == s``."""
        if self.kind == "randomized":
            return f"randomized:max={self.max_length}"
        if self.kind == "pose":
            return f"pose:target={self.target_length},chunks={self.num_chunks}"
        return "contiguous"

    @property
    def max_position(self) -> int | None:
        """One past the largest position id training can produce (None: the training length)."""
        return {"randomized": self.max_length, "pose": self.target_length}.get(self.kind)

    def train_bytes(self, batch: int) -> int:
        """Memory one batch of training positions takes: randomized draws B x M float32 keys (see above)."""
        return 4 * batch * self.max_length if self.kind == "randomized" else 0

    def train_positions(self, batch: int, length: int, generator: torch.Generator | None = None, device=None) -> Tensor:
        """(B, L) long training positions."""
        if self.kind == "randomized":
            return randomized_positions(batch, length, self.max_length, generator, device)
        if self.kind == "pose":
            return pose_positions(batch, length, self.target_length, self.num_chunks, generator, device)
        _check(batch, length)
        import torch

        from extrap.devices import sampling_device

        return torch.arange(length, device=sampling_device(generator, device)).expand(batch, length).clone()

    def eval_positions(self, length: int, device=None) -> Tensor:
        """(L,) long: 0..L-1."""
        import torch

        return torch.arange(length, device=device)

    def __str__(self) -> str:
        return self.spec


__all__ = ["randomized_positions", "pose_positions", "PositionSampler"]
