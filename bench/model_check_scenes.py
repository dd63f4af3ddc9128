"""Export every built-in scene's policy to ONNX and check it against every Unity inference engine.

Each scene is served in-process (the academy's gRPC stand-in), so the brain is what the trainer decodes
from the scene's own messages; a trainer with random weights is built for it (the ops of an export do
not depend on what was learned), exported as a run exports, and checked with
``unityagents-check-model --engine all``. Hallway is exported recurrent, PushCollab and Soccer
(SoccerTwos) through POCA, Interact is the hybrid-action scene and Sorter the variable-length one.
Prints one line per scene and engine, and the check's time per model::

    python bench/model_check_scenes.py [outdir]
"""
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from academy import SCENES, UNITY_NAMES, load_scene  # noqa: E402
from tests.served_scene import Served  # noqa: E402
from trainers.export.model_check import ENGINES, EXPORT_ENGINES, check_model  # noqa: E402
from trainers.export.onnx_model import export_onnx  # noqa: E402
from trainers.tf_utils import tf  # noqa: E402

#: scene -> (trainer type, extra settings)
SPECIAL = {"Hallway": ("ppo", {"use_recurrent": True, "memory_size": 16, "sequence_length": 4}),
           "PushCollab": ("poca", {}), "Soccer": ("poca", {})}


def behavior(scene):
    cls = load_scene(scene)
    brain = next(b for b in cls.brains if b.brain_type == "external")
    unity = UNITY_NAMES.get(brain.name, brain.name)
    return getattr(cls, "behavior_names", {}).get(brain.name, f"{unity}?team=0")


def build(brain, kind, extra):
    from trainers.poca.trainer import POCATrainer
    from trainers.ppo.trainer import PPOTrainer

    params = {"graph_scope": "", "summary_path": "", "batch_size": 8, "buffer_size": 48, "time_horizon": 5,
              "sequence_length": 4, "hidden_units": 16, "num_layers": 1, "max_steps": 1000, "num_epoch": 1,
              "normalize": True, **extra}
    sess = tf.Session(graph=tf.Graph())
    cls = POCATrainer if kind == "poca" else PPOTrainer
    trainer = cls(sess, {brain.brain_name: brain}, brain.brain_name, params, training=True)
    with sess.graph.as_default():
        sess.run(tf.global_variables_initializer())
    sess.graph.finalize()
    return trainer


def timed(path, engines, repeats=20):
    """The best of ``repeats`` checks of ``path`` (read from disk each time), in milliseconds."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        check_model(path, engines)
        best = min(best, time.perf_counter() - start)
    return best * 1000


def main(outdir):
    engines = ENGINES
    failed = 0
    for scene in SCENES:
        name = behavior(scene)
        with Served(scene) as served:
            brain = served.handshake().brains[name]
        kind, extra = SPECIAL.get(scene, ("ppo", {}))
        trainer = build(brain, kind, extra)
        folder = os.path.join(outdir, scene)
        os.makedirs(folder, exist_ok=True)
        start = time.perf_counter()
        (path,) = export_onnx(trainer.sess, [trainer], folder, strict=False)
        export_ms = (time.perf_counter() - start) * 1000
        trainer.sess.close()
        report = check_model(path, engines)
        for verdict in report.verdicts:
            failed += not verdict.loads
            problems = "; ".join(f"{f.severity} {f.rule}@{f.node}" for f in verdict.problems())
            print(f"{scene:11s} {kind:4s} {verdict.engine:14s} {verdict.status}{': ' + problems if problems else ''}")
        at_export, every = timed(path, EXPORT_ENGINES), timed(path, engines)
        print(f"{scene:11s} {os.path.basename(path)} ({os.path.getsize(path)} bytes): export {export_ms:.0f} ms "
              f"(its check included); check against the {len(EXPORT_ENGINES)} export engines {at_export:.1f} ms "
              f"({at_export / export_ms:.1%} of the export), against all {len(engines)} {every:.1f} ms")
    print(f"engine verdicts that fail: {failed}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="model_check_"))
