"""Evaluating a trained classifier, the ways PyTorch users do it.

A small MLP with BatchNorm1d is trained a few steps on three Gaussian blobs, then
evaluated in eval mode with ``@torch.inference_mode()`` as a decorator and as a
context (``torch.is_inference_mode_enabled()``, ``is_inference()`` of what it
makes, ``torch.no_grad`` nested in it, ``inference_mode(False)`` inside it, a
``clone()`` to use a result in autograd afterwards): accuracy, argmax and topk,
``torch.softmax(...).max(dim=1)`` confidences, a confusion matrix made with
``torch.bincount`` and again with ``index_put_(..., accumulate=True)``,
per-class recall. The state dict then makes a round trip through ``torch.save``
into an ``io.BytesIO`` and ``torch.load``, into a fresh model that is evaluated
again.
"""

import io

import numpy as np

FEATURES = 8
CLASSES = 3
TRAIN = 90
TEST = 30
BATCH = 30
STEPS = 6


def run(torch, compile=None) -> dict:
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(3)

    centres = 0.5 * rng.standard_normal((CLASSES, FEATURES))
    labels = rng.integers(0, CLASSES, TRAIN + TEST)
    features = centres[labels] + rng.standard_normal((TRAIN + TEST, FEATURES))
    x = torch.tensor(features, dtype=torch.float32)
    y = torch.tensor(labels)
    x_train, y_train, x_test, y_test = x[:TRAIN], y[:TRAIN], x[TRAIN:], y[TRAIN:]

    def make_model():
        return nn.Sequential(
            nn.Linear(FEATURES, 32, bias=False),  # the BatchNorm after it has a bias
            nn.BatchNorm1d(32),
            nn.ReLU(),
            nn.Linear(32, CLASSES),
        )

    model = make_model()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.tensor(0.3 * rng.standard_normal(tuple(p.shape)), dtype=torch.float32))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)

    def train_step(xb, yb):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(xb), yb)
        loss.backward()
        optimizer.step()
        return loss

    if compile:
        train_step = compile(train_step)

    model.train()
    losses = []
    for step in range(STEPS):
        batch = slice(step * BATCH % TRAIN, step * BATCH % TRAIN + BATCH)
        losses.append(train_step(x_train[batch], y_train[batch]).item())

    @torch.inference_mode()
    def evaluate(model, inputs, targets):
        logits = model(inputs)
        probs = torch.softmax(logits, dim=1)
        confidence, predicted = probs.max(dim=1)
        correct = (predicted == targets).sum().item()
        return {
            "inference_mode_enabled": torch.is_inference_mode_enabled(),
            "grad_enabled": torch.is_grad_enabled(),
            "logits_is_inference": logits.is_inference(),
            "logits_requires_grad": logits.requires_grad,
            "accuracy": correct / len(targets),
            "loss": F.cross_entropy(logits, targets).item(),
            "predicted": predicted.tolist(),
            "confidence": confidence.tolist(),
        }

    model.eval()
    outside = {
        "inference_mode_enabled": torch.is_inference_mode_enabled(),
        "training": model.training,
        "bn_training": model[1].training,
    }
    test_eval = evaluate(model, x_test, y_test)
    train_eval = evaluate(model, x_train, y_train)

    with torch.inference_mode():
        logits = model(x_test)
        top2 = logits.topk(2, dim=1)
        predicted = logits.argmax(dim=1)
        # a confusion matrix: rows the true classes, columns the predictions
        confusion = torch.bincount(y_test * CLASSES + predicted, minlength=CLASSES**2)
        confusion = confusion.reshape(CLASSES, CLASSES)
        confusion2 = torch.zeros(CLASSES, CLASSES, dtype=torch.long)
        ones = torch.ones(TEST, dtype=torch.long)
        confusion2.index_put_((y_test, predicted), ones, accumulate=True)
        recall = confusion.diag().float() / confusion.sum(dim=1).float()
        with torch.no_grad():
            nested = {
                "inference_mode_enabled": torch.is_inference_mode_enabled(),
                "grad_enabled": torch.is_grad_enabled(),
                "is_inference": (logits * 2).is_inference(),
            }
        with torch.inference_mode(False):
            nested["disabled_inside"] = torch.is_inference_mode_enabled()
            nested["made_inside_is_inference"] = torch.ones(2).is_inference()
        context = {
            "confusion_is_inference": confusion.is_inference(),
            "top2_values": top2.values[:5].tolist(),
            "top2_indices": top2.indices.tolist(),
            "confusion": confusion.tolist(),
            "confusion_index_put": confusion2.tolist(),
            "recall": recall.tolist(),
        }

    # an inference tensor must be cloned to take part in autograd afterwards
    features = logits.clone()
    weight = torch.ones(CLASSES, requires_grad=True)
    (features * weight).sum().backward()
    autograd_after = {
        "logits_is_inference": logits.is_inference(),
        "clone_is_inference": features.is_inference(),
        "weight_grad": weight.grad.tolist(),
    }

    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    buffer.seek(0)
    state_dict = torch.load(buffer)
    restored = make_model()
    result = restored.load_state_dict(state_dict)
    restored.eval()
    restored_eval = evaluate(restored, x_test, y_test)
    with torch.inference_mode():
        same_logits = torch.equal(restored(x_test), model(x_test))

    return {
        "losses": losses,
        "outside": outside,
        "test": test_eval,
        "train_accuracy": train_eval["accuracy"],
        "train_loss": train_eval["loss"],
        "context": context,
        "nested": nested,
        "autograd_after": autograd_after,
        "state_dict_keys": list(state_dict),
        "missing_keys": result.missing_keys,
        "unexpected_keys": result.unexpected_keys,
        "num_batches_tracked": state_dict["1.num_batches_tracked"].item(),
        "running_mean[:4]": state_dict["1.running_mean"][:4].tolist(),
        "restored_accuracy": restored_eval["accuracy"],
        "restored_same_logits": same_logits,
        "restored_confidence": restored_eval["confidence"],
    }
