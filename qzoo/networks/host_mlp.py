"""A plain MLP's Q-values in NumPy, for acting on a CPU: PyTorch's per-operation cost
is most of a small network's step there."""

import numpy as np


class HostMlp:
    """A plain MLP network's Q-values (`_plain_mlp_layers`) computed in NumPy, on views
    of its parameters (so always its current weights: optimizers and load_state_dict
    write them in place; a moved or replaced parameter is seen and viewed afresh).

    For a CPU actor choosing one action at a time (Policy): a PyTorch pass there is
    mostly dispatch, and NumPy's dispatch costs far less. NumPy's matrix products sum in
    another order than PyTorch's: Q-values differ in the last bits (about 1e-8), so an
    action can differ only where two actions' values are that close."""

    def __init__(self, network):
        self.layers, self.input_scale = network._mlp, network.input_scale
        self._views = [None] * len(self.layers)

    @staticmethod
    def of(network):
        """A HostMlp for `network`, or None when it is not a plain MLP."""
        return HostMlp(network) if getattr(network, "_mlp", None) is not None else None

    def _arrays(self, i):
        parameters = self.layers[i]._parameters  # a dict look-up, not Module.__getattr__
        weight, bias = parameters["weight"], parameters["bias"]
        view = self._views[i]
        if view is None or view[0] != weight.data_ptr() or view[1] != bias.data_ptr():
            arrays = weight.detach().numpy().T, bias.detach().numpy()
            view = self._views[i] = (weight.data_ptr(), bias.data_ptr(), *arrays)
        return view[2], view[3]

    def __call__(self, observation):
        """Q-values [N, A] (float32) for observations [N, D] (NumPy)."""
        x = np.asarray(observation, np.float32)
        x = x.reshape(len(x), -1)  # a view; the same array for vectors
        if self.input_scale != 1.0:
            x = x * np.float32(self.input_scale)
        last = len(self.layers) - 1
        for i in range(last + 1):
            weight_t, bias = self._arrays(i)
            x = x @ weight_t
            x += bias
            if i < last:
                np.maximum(x, 0, out=x)
        return x
