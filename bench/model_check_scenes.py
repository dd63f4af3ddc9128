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
from trainers.export.model_check import ENGINES, check_model  # noqa: E402
from trainers.export.onnx_model import export_onnx  # noqa: E402
from trainers.tf_utils import tf  # noqa: E402

#: scene -> (trainer type, extra settings)
SPECIAL = {"Hallway": ("ppo", {"use_recurrent": True, "memory_size": 16, "sequence_length": 4}),
           "PushCollab": ("poca", {}), "Soccer": ("poca", {})}


def behaviour(scene):
    cls = load_scene(scene)
    brain = next(b for b in cls.brains if b.brain_type == "external")
    unity = UNITY_NAMES.get(brain.name, brain.name)
    return getattr(cls, "behaviour_names", {}).get(brain.name, f"{unity}?team=0")


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


def main(outdir):
    engines = sorted(ENGINES)
    failed = 0
    for scene in SCENES:
        name = behaviour(scene)
        with Served(scene) as served:
            brain = served.handshake().brains[name]
        kind, extra = SPECIAL.get(scene, ("ppo", {}))
        trainer = build(brain, kind, extra)
        folder = os.path.join(outdir, scene)
        os.makedirs(folder, exist_ok=True)
        (path,) = export_onnx(trainer.sess, [trainer], folder, strict=False)
        trainer.sess.close()
        start = time.perf_counter()
        report = check_model(path, engines)
        took = time.perf_counter() - start
        for verdict in report.verdicts:
            failed += not verdict.loads
            print(f"{scene:11s} {kind:4s} {verdict.engine:15s} {verdict.status:25s} "
                  + "; ".join(f"{f.rule}@{f.node}" for f in verdict.findings))
        print(f"{scene:11s} check of {os.path.basename(path)} against {len(engines)} engines: {took * 1000:.1f} ms")
    print(f"engines that refuse a model: {failed}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="model_check_"))
