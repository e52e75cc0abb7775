"""The authors' InLine-DeiT, rebuilt in the tests from the facts of ``tests/data/fixtures/README.md``
(not from our code): a plain ViT whose attention runs over all N = 1 + h*w tokens, with the local
residual on the patch tokens alone. It takes the authors' checkpoint layout as it is (strict), and,
beyond the authors' square training input, any size: zero padding to multiples of the patch, the
position grid resampled by timm's own ``resample_abs_pos_embed`` (what a dense backbone must do).
Textbook evaluation: q, k, v formed, (k^T v) per head, one grouped convolution per batch."""

import torch
import torch.nn.functional as F
from timm.layers import resample_abs_pos_embed
from torch import nn


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int, qkv_bias: bool) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=qkv_bias)
        self.proj = nn.Linear(dim, dim)
        self.residual = nn.Sequential(nn.Conv1d(dim, dim, 1, groups=heads), nn.GELU(),
                                      nn.Conv1d(dim, 9 * dim, 1, groups=heads))

    def forward(self, x: torch.Tensor, h: int, w: int) -> torch.Tensor:
        b, n, c = x.shape
        d = c // self.heads
        s = d ** -0.5
        q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, d).permute(2, 0, 3, 1, 4)  # (b, heads, n, d)
        mean_k, mean_v = k.mean(2, keepdim=True), v.mean(2, keepdim=True)
        out = (q @ (k.transpose(-2, -1) @ v)) * (s / n) + (1 - s * (q @ mean_k.transpose(-2, -1))) * mean_v
        out = out.transpose(1, 2).reshape(b, n, c)
        # the 3x3 taps per sample from the mean of all N tokens: output 9c + t is tap t of channel c
        taps = self.residual(x.mean(1).unsqueeze(-1)).reshape(b * c, 1, 3, 3)
        v_grid = v.transpose(1, 2).reshape(b, n, c)[:, 1:].transpose(1, 2).reshape(1, b * c, h, w)
        local = F.conv2d(v_grid, taps, padding=1, groups=b * c).reshape(b, c, h * w).transpose(1, 2)
        return self.proj(out + torch.cat([torch.zeros_like(local[:, :1]), local], 1))


class Mlp(nn.Module):
    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.fc1, self.act, self.fc2 = nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))


class Block(nn.Module):
    def __init__(self, dim: int, heads: int, mlp_ratio: float, qkv_bias: bool) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = Attention(dim, heads, qkv_bias)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = Mlp(dim, int(dim * mlp_ratio))

    def forward(self, x: torch.Tensor, h: int, w: int) -> torch.Tensor:
        x = x + self.attn(self.norm1(x), h, w)
        return x + self.mlp(self.norm2(x))


class AuthorsDeiT(nn.Module):
    """The authors' layout: ``cls_token``, ``pos_embed``, ``patch_embed.proj``, ``blocks.i``, ``norm``, ``head``."""

    def __init__(self, img_size: int, patch_size: int, embed_dim: int, depth: int, num_heads: int,
                 mlp_ratio: float = 4.0, qkv_bias: bool = True, num_classes: int = 10) -> None:
        super().__init__()
        self.patch = patch_size
        self.grid = img_size // patch_size
        self.patch_embed = nn.Module()
        self.patch_embed.proj = nn.Conv2d(3, embed_dim, patch_size, stride=patch_size)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, 1 + self.grid ** 2, embed_dim))
        self.blocks = nn.ModuleList(Block(embed_dim, num_heads, mlp_ratio, qkv_bias) for _ in range(depth))
        self.norm = nn.LayerNorm(embed_dim, eps=1e-6)
        self.head = nn.Linear(embed_dim, num_classes)

    def forward(self, x: torch.Tensor) -> tuple[list[torch.Tensor], list[torch.Tensor], torch.Tensor]:
        """(B, 3, H, W) -> every block's patch tokens as (B, C, h, w) maps, its cls tokens (B, C), the logits."""
        p = self.patch
        x = F.pad(x, (0, -x.shape[-1] % p, 0, -x.shape[-2] % p))
        x = self.patch_embed.proj(x)
        b, c, h, w = x.shape
        pos = resample_abs_pos_embed(self.pos_embed, [h, w], [self.grid, self.grid], num_prefix_tokens=1)
        x = torch.cat([self.cls_token.expand(b, -1, -1), x.flatten(2).transpose(1, 2)], 1) + pos
        maps, cls = [], []
        for block in self.blocks:
            x = block(x, h, w)
            maps.append(x[:, 1:].transpose(1, 2).reshape(b, c, h, w))
            cls.append(x[:, 0])
        return maps, cls, self.head(self.norm(x)[:, 0])


def randomise(model: nn.Module, seed: int) -> nn.Module:
    """Every parameter drawn (seeded), norms and biases included, so no part of the model is trivial."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith('norm1.weight') or name.endswith('norm2.weight') or name == 'norm.weight':
                param.copy_(1 + 0.2 * torch.randn(param.shape, generator=g))
            else:
                fan_in = param[0].numel() if param.ndim > 1 else 16
                param.copy_(torch.randn(param.shape, generator=g) * min(0.5, fan_in ** -0.5))
    return model.eval()
