"""ALE's grey (what ale-py's vector environment gives qzoo) against DQN Zoo's, on raw
frames of random play, in one run.

    python benchmarks/grayscale.py [--games space_invaders,pong,breakout] [--frames 400]

DQN Zoo takes the max of the last two raw frames in RGB, then converts with its rgb2y
(weights 0.299, 0.587 and 1 - (0.299 + 0.587) on the uint8 channels, truncated to
uint8); ale-py converts each raw frame with ALE's own luminance, then takes the max of
the two greys. Prints a JSON line per game: how ALE's grey of a frame differs from
rgb2y's (the share of pixels, the largest gap), how the order alone matters (rgb2y of
the RGB max against the max of the two rgb2y greys), and the two pipelines end to end
(ALE's max of greys against DQN Zoo's rgb2y of the RGB max), over consecutive raw
frames. Random actions (seed 0), one raw frame a step, a new game at game over.
"""

import numpy as np
from harness import emit, new_parser

WEIGHTS = np.array([0.299, 0.587, 1 - (0.299 + 0.587)])


def rgb2y(rgb):
    """DQN Zoo's processors.rgb2y on a uint8 [H, W, 3] frame."""
    return np.tensordot(rgb, WEIGHTS, (-1, 0)).astype(np.uint8).astype(int)


def compare(game, frames):
    """The three comparisons of the module docstring over `frames` raw frames."""
    from ale_py import ALEInterface, LoggerMode, roms

    ALEInterface.setLoggerMode(LoggerMode.Error)  # ALE's banner would mix with the lines
    ale = ALEInterface()
    ale.setInt("random_seed", 0)
    ale.loadROM(roms.get_rom_path(game))
    actions, rng = ale.getMinimalActionSet(), np.random.default_rng(0)
    differing = pixels = largest = order = end_to_end = 0
    previous = None
    for _ in range(frames):
        ale.act(actions[rng.integers(len(actions))])
        if ale.game_over():
            ale.reset_game()
        rgb, grey = ale.getScreenRGB(), ale.getScreenGrayscale().astype(int)
        gap = np.abs(grey - rgb2y(rgb))
        differing += int((gap > 0).sum())
        pixels += gap.size
        largest = max(largest, int(gap.max()))
        if previous is not None:
            theirs = rgb2y(np.maximum(rgb, previous[0]))
            order = max(order, int(np.abs(np.maximum(rgb2y(rgb), rgb2y(previous[0])) - theirs).max()))
            end_to_end = max(end_to_end, int(np.abs(np.maximum(grey, previous[1]) - theirs).max()))
        previous = rgb, grey
    return {"name": "ale_grey_vs_rgb2y", "game": game, "frames": frames,
            "pixels_differing": differing / pixels, "largest_difference": largest,
            "largest_order_difference": order, "largest_end_to_end_difference": end_to_end}  # fmt: skip


def main():
    parser = new_parser(__doc__)
    parser.add_argument("--games", default="space_invaders,pong,breakout")
    parser.add_argument("--frames", type=int, default=400)
    args = parser.parse_args()
    for game in args.games.split(","):
        emit(compare(game, args.frames))


if __name__ == "__main__":
    main()
