"""Whether a loaded state fits a new one: the first array whose shape or dtype differs
(a resumed run's checkpoint against the trainer its config builds)."""


def first_mismatch(saved, reference, where=""):
    """Compares the arrays of a loaded tree with those of a reference tree (e.g. a new
    trainer's state), where both have one; returns the first difference in shape or
    dtype as text ("path is <dtype> <shape> there but <dtype> <shape> here"), or None.
    A reference array with 0 rows (an empty replay) grows with data: only its other
    dimensions are compared."""
    pairs = []
    if isinstance(reference, dict) and isinstance(saved, dict):
        pairs = [(saved[k], reference[k], f"{where}/{k}") for k in reference if k in saved]
    elif isinstance(reference, (list, tuple)) and isinstance(saved, (list, tuple)):
        pairs = [(a, b, f"{where}/{i}") for i, (a, b) in enumerate(zip(saved, reference))]
    elif hasattr(reference, "shape") and hasattr(saved, "shape"):
        a, b = tuple(saved.shape), tuple(reference.shape)
        same = len(a) == len(b) and a[1:] == b[1:] and (a[:1] == b[:1] or b[:1] == (0,))
        if not same or str(saved.dtype) != str(reference.dtype):
            return f"{where.lstrip('/')} is {saved.dtype} {a} there but {reference.dtype} {b} here"
    for a, b, path in pairs:
        mismatch = first_mismatch(a, b, path)
        if mismatch:
            return mismatch
    return None
