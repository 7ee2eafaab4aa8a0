"""ALE's grey (what ale-py's vector environment gives qzoo) against DQN Zoo's, on raw
frames of random play, in one run.

    python benchmarks/grayscale.py [--games space_invaders,pong,breakout] [--frames 400]

DQN Zoo takes the max of the last two raw frames in RGB, then converts with rgb2y
(Y = 0.299 R + 0.587 G + 0.114 B, truncated to uint8); ale-py converts each raw frame
with ALE's own luminance, then takes the max of the two greys. Prints a JSON line per
game: the share of pixels where ALE's grey differs from rgb2y of the same frame and by
how much at most, and the largest difference between the two orders (max of greys
against grey of the RGB max) over consecutive frames. Random actions (seed 0), one raw
frame a step, a new game at game over.
"""

import numpy as np
from harness import emit, new_parser


def rgb2y(rgb):
    return (0.299 * rgb[..., 0] + 0.587 * rgb[..., 1] + 0.114 * rgb[..., 2]).astype(np.uint8)


def compare(game, frames):
    from ale_py import ALEInterface, LoggerMode, roms

    ALEInterface.setLoggerMode(LoggerMode.Error)  # ALE's banner would mix with the lines
    ale = ALEInterface()
    ale.setInt("random_seed", 0)
    ale.loadROM(roms.get_rom_path(game))
    actions, rng = ale.getMinimalActionSet(), np.random.default_rng(0)
    differing = pixels = largest = order = 0
    previous = None
    for _ in range(frames):
        ale.act(actions[rng.integers(len(actions))])
        if ale.game_over():
            ale.reset_game()
        rgb, grey = ale.getScreenRGB().astype(np.float64), ale.getScreenGrayscale().astype(int)
        gap = np.abs(grey - rgb2y(rgb).astype(int))
        differing, pixels, largest = differing + int((gap > 0).sum()), pixels + gap.size, \
            max(largest, int(gap.max()))  # fmt: skip
        if previous is not None:
            ours = np.maximum(grey, previous[1])
            theirs = rgb2y(np.maximum(rgb, previous[0])).astype(int)
            order = max(order, int(np.abs(ours - theirs).max()))
        previous = rgb, grey
    return {"name": "ale_grey_vs_rgb2y", "game": game, "frames": frames,
            "pixels_differing": differing / pixels, "largest_difference": largest,
            "largest_order_difference": order}  # fmt: skip


def main():
    parser = new_parser(__doc__)
    parser.add_argument("--games", default="space_invaders,pong,breakout")
    parser.add_argument("--frames", type=int, default=400)
    args = parser.parse_args()
    for game in args.games.split(","):
        emit(compare(game, args.frames))


if __name__ == "__main__":
    main()
