"""Image augmentation of sampled batches (`--augmentation`): DrQ's random shift
(Kostrikov, Yarats & Fergus 2020, "Image Augmentation Is All You Need", arXiv:2004.13649),
which DrQ(eps) (Agarwal et al. 2021, arXiv:2108.13264) runs on a DQN.

Each image of a batch [B, C, H, W] is padded by 4 pixels repeating its edge and cropped
back to H x W at a row and a column offset drawn uniformly from 0..8: an integer shift
within +-4 pixels, one per image, shared by its C stacked frames (`--shift-offsets
batch`: one for the whole batch, as Dopamine's DrQ code drew them until 2022). `shift_intensity` then
scales each image by 1 + 0.05 clip(N(0, 1), -2, 2), as Dopamine's DrQ(eps) agent does
after Schwarzer et al. 2020. The learner applies it to s_tm1 and s_t with independent
draws at every update; acting and evaluation see the frames as they are. The draws come
from the learner's stream through networks/draws.py, so a compiled update takes them as
it takes noisy nets' noise, and a run resumes exactly.
"""

import torch

from qzoo.networks import draws

PAD = 4  # pixels (DrQ)
INTENSITY = 0.05  # Dopamine's DrQ(eps)


def shift_images(frames, rows, columns, pad=PAD):
    """Each image of `frames` [B, C, H, W] padded by `pad` pixels repeating its edge and
    cropped back at (rows[b], columns[b]) in 0..2 pad: output pixel (i, j) is input pixel
    (clamp(i + row - pad), clamp(j + column - pad)). Same dtype out as in."""
    b, c, h, w = frames.shape
    row_index = (torch.arange(h, device=frames.device) + (rows[:, None] - pad)).clamp(0, h - 1)
    col_index = (torch.arange(w, device=frames.device) + (columns[:, None] - pad)).clamp(0, w - 1)
    shifted = frames.gather(2, row_index[:, None, :, None].expand(b, c, h, w))
    return shifted.gather(3, col_index[:, None, None, :].expand(b, c, h, w))


def random_shift(frames, generator, pad=PAD, per="image"):
    """DrQ's random shift: offsets uniform over 0..2 pad per image (`per` "batch": one
    for all the images) and axis, drawn as uniforms from `generator` (a
    torch.Generator, or a draws.Tape)."""
    b = frames.shape[0]
    u = draws.uniform((2, b if per == "image" else 1), generator, frames.device)
    offsets = (u * (2 * pad + 1)).to(torch.int64).clamp(max=2 * pad).expand(2, b)
    return shift_images(frames, offsets[0], offsets[1], pad)


def intensity_noise(frames, generator, scale=INTENSITY):
    """frames * (1 + scale clip(eps, -2, 2)), one standard normal eps per image; float32
    out (uint8 pixels keep their 0..255 scale, which the network divides by)."""
    eps = draws.normal((frames.shape[0], 1, 1, 1), generator, frames.device)
    return frames.float() * (1.0 + scale * eps.clamp(-2.0, 2.0))


def augment(kind, frames, generator, per="image"):
    """`frames` augmented as `kind` (none, shift, shift_intensity) says, shift offsets
    drawn `per` image or batch."""
    if kind == "none":
        return frames
    shifted = random_shift(frames, generator, per=per)
    return intensity_noise(shifted, generator) if kind == "shift_intensity" else shifted


class Augmented:
    """An objective whose batches' s_tm1 and s_t are augmented first (independent draws,
    s_tm1's then s_t's), from the learner's random stream."""

    def __init__(self, objective, kind, per="image"):
        self.objective, self.kind, self.per = objective, kind, per

    def __call__(self, online, target, batch, generator):
        batch = batch._replace(
            s_tm1=augment(self.kind, batch.s_tm1, generator, self.per),
            s_t=augment(self.kind, batch.s_t, generator, self.per),
        )
        return self.objective(online, target, batch, generator)

    def __getattr__(self, name):  # the objective's own attributes (e.g. its kind)
        if name == "objective":  # not set yet (a copy being made)
            raise AttributeError(name)
        return getattr(self.objective, name)
