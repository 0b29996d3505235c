"""A two-layer ReLU network's training step in plain NumPy, written the way people write it by
hand (CS231n style): the program ``chokepoint explain`` is tried on in docs/explain.md.

    chokepoint explain -s "from two_layer_net import *; X, y, W1, b1, W2, b2 = data(2000)" \\
        "step(X, y, W1, b1, W2, b2)"
"""

import numpy as np


def data(n=10000, d=3072, h=512, classes=10, dtype=np.float32, seed=0):
    """CIFAR-10-sized inputs and weights: ``X, y, W1, b1, W2, b2``."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d), dtype=np.float32).astype(dtype)
    y = rng.integers(0, classes, n)
    W1 = (1e-2 * rng.standard_normal((d, h))).astype(dtype)
    b1 = np.zeros(h, dtype)
    W2 = (1e-2 * rng.standard_normal((h, classes))).astype(dtype)
    b2 = np.zeros(classes, dtype)
    return X, y, W1, b1, W2, b2


def step(X, y, W1, b1, W2, b2, reg=1e-3):
    """Loss and gradients of a softmax classifier on one ReLU hidden layer."""
    N = X.shape[0]
    hidden = np.maximum(0, X.dot(W1) + b1)
    scores = hidden.dot(W2) + b2
    exp_scores = np.exp(scores - np.max(scores, axis=1, keepdims=True))
    probs = exp_scores / np.sum(exp_scores, axis=1, keepdims=True)
    loss = -np.sum(np.log(probs[np.arange(N), y])) / N
    loss += 0.5 * reg * (np.sum(W1 * W1) + np.sum(W2 * W2))
    dscores = probs
    dscores[np.arange(N), y] -= 1
    dscores /= N
    dW2 = hidden.T.dot(dscores)
    db2 = np.sum(dscores, axis=0)
    dhidden = dscores.dot(W2.T)
    dhidden[hidden <= 0] = 0
    dW1 = X.T.dot(dhidden)
    db1 = np.sum(dhidden, axis=0)
    dW2 += reg * W2
    dW1 += reg * W1
    return loss, {"W1": dW1, "b1": db1, "W2": dW2, "b2": db2}
