"""``BackgroundUpdates``: one update per trainer in flight, errors raised on the caller's thread."""
import threading
import types

import pytest

from runner.background import BackgroundUpdates


def trainer(name: str):
    return types.SimpleNamespace(brain_name=name)


def test_a_trainers_next_update_starts_only_after_its_previous_one_ended():
    updates, order = BackgroundUpdates(), []
    release = threading.Event()

    def first():
        release.wait(5)
        order.append("first")

    updates.start(trainer("A"), first)
    threading.Timer(0.05, release.set).start()
    updates.start(trainer("A"), lambda: order.append("second"))  # blocks until the first is done
    assert order[0] == "first"
    updates.close()
    assert order == ["first", "second"] and updates.count == 2


def test_an_update_error_is_raised_on_the_callers_thread_at_the_next_wait():
    updates = BackgroundUpdates()

    def broken():
        raise ValueError("NaN in the update")

    updates.start(trainer("A"), broken)
    with pytest.raises(ValueError, match="NaN in the update"):
        updates.wait()
    updates.wait()  # raised once: the failed update is no longer in flight
    updates.start(trainer("A"), broken)
    with pytest.raises(ValueError):
        updates.start(trainer("A"), lambda: None)  # the trainer's next update meets it first
    updates.close()


def test_close_waits_for_every_update_and_raises_its_error():
    updates, done = BackgroundUpdates(), []
    updates.start(trainer("A"), lambda: done.append("A"))
    updates.start(trainer("B"), lambda: (_ for _ in ()).throw(RuntimeError("B failed")))
    with pytest.raises(RuntimeError, match="B failed"):
        updates.close()
    assert done == ["A"]
