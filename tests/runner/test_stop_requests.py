"""A signal requests a stop; the run takes it at a safe point, never at whatever bytecode was running."""
import os
import signal

import pytest

from runner import stopping
from runner.stopping import Stop
from tests.conftest import write
from tests.unityagents.vector.test_environment_set import ScriptedWorker


@pytest.fixture
def handlers():
    """This module's handlers, installed as learn.py installs them; the previous ones restored after."""
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    stopping.install_signal_handlers()
    yield
    stopping.clear_stop_request()
    for s, h in previous.items():
        signal.signal(s, h)


def kill(signum):
    os.kill(os.getpid(), signum)  # the handler runs in this (the main) thread before kill returns


def test_a_signal_only_requests_and_a_safe_point_raises_it(handlers):
    kill(signal.SIGTERM)  # no exception here, at an arbitrary bytecode
    assert stopping.stop_requested() == signal.SIGTERM
    kill(signal.SIGINT)  # a second signal adds nothing: the first one's request stands
    with pytest.raises(Stop) as e:
        stopping.check_stop()
    assert e.value.signum == signal.SIGTERM and not e.value.saved
    stopping.check_stop()  # raised once: goes on
    assert stopping.stop_requested() == signal.SIGTERM  # still set: updates in flight end early


def test_a_sigterm_outranks_a_sigint_not_yet_taken(handlers):
    """Signals that arrive together are handled in the order of their numbers (SIGINT 2 first)."""
    kill(signal.SIGINT)
    kill(signal.SIGTERM)
    with pytest.raises(Stop) as e:
        stopping.check_stop()
    assert e.value.signum == signal.SIGTERM


def test_a_wait_is_cut_short_and_a_pending_request_ends_it_on_entry(handlers):
    with pytest.raises(Stop) as e:
        with stopping.interruptible():
            kill(signal.SIGINT)
            raise AssertionError("the signal did not end the wait")
    assert e.value.signum == signal.SIGINT
    stopping.request_stop(signal.SIGTERM)
    with pytest.raises(Stop):
        with stopping.interruptible():
            raise AssertionError("a pending request did not end the wait on entry")


def test_a_save_finishes_first_even_inside_a_wait(handlers):
    written = []
    with pytest.raises(Stop) as e:
        with stopping.interruptible(), stopping.shielded():
            with stopping.shielded():  # the saver's shield inside the controller's
                kill(signal.SIGTERM)
                written.append("checkpoint")
            written.append("export")  # the inner shield's end raises nothing: the outer one is open
    assert written == ["checkpoint", "export"] and e.value.signum == signal.SIGTERM


def test_a_failed_save_keeps_its_error_and_the_request(handlers):
    with pytest.raises(OSError):
        with stopping.shielded():
            kill(signal.SIGTERM)
            raise OSError("disk full")
    with pytest.raises(Stop):  # the request waits for the next safe point
        stopping.check_stop()


class SignalAtStep(ScriptedWorker):
    """Sends ``signum`` to the process while the controller hands it step ``at`` (a wait's entry
    takes it) or, with ``in_wait``, while the controller waits for that step's answer."""

    def __init__(self, index, signum, at, in_wait=False):
        super().__init__(index)
        self.signum, self.at, self.in_wait = signum, at, in_wait

    def step_send(self, action=None, memory=None, value=None):
        super().step_send(action, memory, value)
        if self.steps == self.at and not self.in_wait:
            kill(self.signum)

    def receive(self):
        if self._sent == "step" and self.steps == self.at and self.in_wait:
            kill(self.signum)
            raise AssertionError("the signal did not end the wait for the environment")
        return super().receive()


def run(tmp_path, worker, config="B:\n    max_steps: 1.0e6\n    summary_freq: 1000000\n"):
    from runner.controller import TrainerController
    from runner.settings.trainer_config import load_trainer_config
    from trainers.trainer.registry import load_registry
    from unityagents.vector.environment_set import EnvironmentSet

    cfg = load_trainer_config(write(tmp_path / "c.yaml", config), load_registry())
    controller = TrainerController(EnvironmentSet.of(worker), cfg, env_name="Scripted",
                                   model_dir=str(tmp_path / "models"), summary_dir=str(tmp_path / "summaries"),
                                   save_freq=0)
    with pytest.raises(Stop) as e:
        controller.start_learning()
    return controller, e.value


def saved_at(tmp_path, controller, worker):
    from trainers.tf_utils import tf

    model = tmp_path / "models" / "ppo"
    assert tf.train.latest_checkpoint(str(model)).endswith(f"model-{controller.global_step}.cptk")
    assert (model / "Scripted.bytes").is_file() and worker.closed


@pytest.mark.parametrize("in_wait", [False, True])
def test_a_signal_around_a_wait_cuts_the_step_saves_and_exports(handlers, tmp_path, in_wait):
    worker = SignalAtStep(0, signal.SIGTERM, at=5, in_wait=in_wait)
    controller, stop = run(tmp_path, worker)
    assert stop.signum == signal.SIGTERM and stop.saved
    assert controller.global_step == 4  # the fifth step's answer was never used
    saved_at(tmp_path, controller, worker)


def test_a_signal_while_learning_from_a_step_lets_the_step_finish(handlers, tmp_path, monkeypatch):
    from runner.controller import TrainerController

    original = TrainerController._experience

    def experience(self, *args):
        if self.global_step == 5:
            kill(signal.SIGINT)  # inside the trainer's bookkeeping: nothing is raised here
        return original(self, *args)

    monkeypatch.setattr(TrainerController, "_experience", experience)
    worker = ScriptedWorker(0)
    controller, stop = run(tmp_path, worker)
    assert stop.signum == signal.SIGINT and stop.saved
    assert controller.global_step == 6  # the step was learned from and counted, then the run stopped
    saved_at(tmp_path, controller, worker)


def test_a_signal_while_a_step_waits_for_the_next_send_learns_from_it_before_the_save(handlers, tmp_path, monkeypatch):
    """The sixth step's experience waits for the seventh step's send (``_experience_can_wait``); a
    stop taken before that send learns from it first, so the run saves at step 6 with it counted."""
    from runner.controller import TrainerController

    original = TrainerController._experience_can_wait
    asked = []

    def can_wait(self, before, after):
        waits = original(self, before, after)
        asked.append(waits)
        if self.global_step == 5:
            assert waits  # the step would wait
            kill(signal.SIGINT)  # taken at the next safe point, the top of the loop
        return waits

    monkeypatch.setattr(TrainerController, "_experience_can_wait", can_wait)
    worker = ScriptedWorker(0)
    config = "B:\n    max_steps: 1.0e6\n    summary_freq: 1000000\n    normalize: false\n"
    controller, stop = run(tmp_path, worker, config)
    assert stop.signum == signal.SIGINT and stop.saved
    assert all(asked) and len(asked) == 6
    assert controller.global_step == 6 and controller.trainers["B"].get_step == 6 * worker.n
    saved_at(tmp_path, controller, worker)


@pytest.mark.parametrize("threaded", [False, True])
def test_a_long_update_ends_between_minibatches(handlers, tmp_path, monkeypatch, threaded):
    """A stop requested during the first minibatch of a 40-minibatch PPO update: the update takes
    one more at most (none on the controller's thread), then the run saves and stops."""
    from trainers.ppo.optimizer import PPOOptimizer

    calls = []
    original = PPOOptimizer._update_call

    def counting(self, *args):
        call = original(self, *args)

        def counted(*a):
            calls.append(1)
            if len(calls) == 1:
                stopping.request_stop(signal.SIGINT)  # as the handler would, from whichever thread runs it
            return call(*a)
        return counted

    monkeypatch.setattr(PPOOptimizer, "_update_call", counting)
    config = ("B:\n    max_steps: 1.0e6\n    summary_freq: 1000000\n    batch_size: 3\n    buffer_size: 12\n"
              f"    time_horizon: 4\n    num_epoch: 10\n    threaded: {str(threaded).lower()}\n")
    controller, stop = run(tmp_path, ScriptedWorker(0), config)
    assert stop.signum == signal.SIGINT and stop.saved
    assert 1 <= len(calls) <= 2, len(calls)  # not 40
