def fit_pymc(*a, **k):
    raise NotImplementedError
