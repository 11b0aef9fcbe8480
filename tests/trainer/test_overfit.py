"""The overfitting warning of pretrain's periodic held-out passes (trainer.loop.overfitting):
the held-out loss above its lowest while the training loss fell since (#37)."""

from fertility.trainer.loop import overfitting


def passes(*rows):
    return [{"step": 100 * (i + 1), "heldout": h, "train": t} for i, (h, t) in enumerate(rows)]


def test_held_out_rising_while_training_falls_is_flagged_with_both_figures():
    history = passes((3.0, 3.2), (2.5, 2.6), (2.6, 2.1))
    message = overfitting(history)
    assert message is not None
    # the lowest held-out pass is step 200 (2.5); the latest, step 300, is above it
    assert "step 300" in message and "2.6000" in message and "2.5000 at step 200" in message
    assert "from 2.6000 to 2.1000" in message


def test_no_flag_while_both_fall_or_both_rise():
    assert overfitting(passes((3.0, 3.2), (2.5, 2.6), (2.4, 2.1))) is None  # learning
    # both rise (a learning rate too high, a bad batch): not overfitting
    assert overfitting(passes((3.0, 3.2), (2.5, 2.6), (2.7, 2.8))) is None
    assert overfitting(passes((3.0, 3.2))) is None  # one pass: nothing to compare
    # the comparison is with the lowest pass, not the previous one: 2.55 < 2.6 but > 2.5
    assert overfitting(passes((2.5, 2.6), (2.6, 2.4), (2.55, 2.3))) is not None


def test_a_pass_without_a_finite_training_loss_is_not_judged():
    assert overfitting(passes((2.5, 2.6), (2.6, None))) is None
