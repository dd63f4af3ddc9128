"""``docs/configuration.md``: the reference tables of every built-in trainer's keys, generated.

The tables come from the same declarations the loader checks against (each trainer's
``hyperparameters``, the reward signals', behavioral cloning's and self-play's nested blocks, and
``SANE_MAXIMUM``), so the documentation cannot drift from the code; ``tests/runner/settings/test_config.py``
compares the file with this text. ``python -m runner.settings.config_docs`` prints it.
"""
from __future__ import annotations

from typing import List, Tuple

from runner.settings.trainer_config import SANE_MAXIMUM, short_number
from trainers.trainer.registry import BUILTIN_TRAINERS, TrainerRegistry


def hyperparameters_markdown(registry: TrainerRegistry, names: Tuple[str, ...] = BUILTIN_TRAINERS) -> str:
    """Reference tables of the built-in trainers' keys (``docs/configuration.md`` is this text)."""
    lines = [
        "# Trainer configuration reference",
        "",
        "Generated from the trainers' declarations by `python -m runner.settings.config_docs`; a test keeps it in",
        "step with the code. `trainer_configurations.yaml` has a `default:` block and one block per",
        "brain; a brain's block overrides the default key by key, and a block may be a string naming",
        "another block (an alias). Steps count agent steps. Numbers such as `1.0e6` are accepted;",
        "numbers must be finite, and a key given twice in one block is an error.",
        "",
    ]
    for name in names:
        cls = registry.get(name)
        lines += [f"## `{name}` ({cls.__module__}.{cls.__name__})", ""]
        doc = (cls.__doc__ or "").strip().splitlines()
        if doc:
            lines += [doc[0], ""]
        lines += ["| key | type | default | allowed | meaning |", "|---|---|---|---|---|"]
        for key, p in sorted(cls.hyperparameters.items()):
            default = "required" if p.required else ("-" if p.default is None else f"`{p.default}`")
            allowed = p.check[1] if p.check else ""
            if p.kind in (int, float) and key in SANE_MAXIMUM:
                bound = f"<= {short_number(SANE_MAXIMUM[key][0])}"
                allowed = f"{allowed}, {bound}" if allowed else bound
            lines.append(f"| `{key}` | {p.kind.__name__} | {default} | {allowed} | {p.doc} |")
        lines.append("")
    lines += _reward_signals_markdown()
    from trainers.imitation.bc import behavioral_cloning_markdown
    lines += behavioral_cloning_markdown()
    from trainers.settings.self_play import self_play_markdown
    lines += self_play_markdown()
    return "\n".join(lines)


def _reward_signals_markdown() -> List[str]:
    """The nested ``reward_signals`` block of PPO (and of plugins that declare it), per signal."""
    from trainers.reward_signals import SIGNAL_PARAMETERS, SIGNAL_TITLES

    lines = [
        "## `reward_signals` (ppo, sac)",
        "",
        "A nested block, one entry per signal; each signal gets its own value head and its own GAE",
        "(its `gamma`), its rewards are multiplied by its `strength`, and the policy's advantage is the",
        "sum of the signals' advantages. Without the block a brain trains on the extrinsic reward alone",
        "with the flat `gamma`, exactly as before; with it, the flat `gamma` is unused and only the listed",
        "signals reward the agent (leave `extrinsic` out and the environment's reward is ignored). An",
        "unknown signal or key, or a wrong type, is an error naming the brain and the dotted key, e.g.",
        "`key 'reward_signals.rnd.strenght'`. TensorBoard: `Policy/<Signal> Reward` and",
        "`Policy/<Signal> Value Estimate` per signal (mean per agent step, after `strength`), and the",
        "intrinsic models' losses under `Losses/`. SAC gives each signal a Q head instead and re-scores every",
        "sampled minibatch with the signals (times `strength`); only `extrinsic` cuts its bootstrap at episode ends.",
        "",
        "```yaml",
        "PyramidsBrain:",
        "    reward_signals:",
        "        extrinsic: {strength: 1.0, gamma: 0.99}",
        "        rnd: {strength: 0.01, gamma: 0.99, encoding_size: 64, learning_rate: 1.0e-4}",
        "```",
        "",
    ]
    for signal, declared in SIGNAL_PARAMETERS.items():
        lines += [f"### `{signal}` ({SIGNAL_TITLES[signal]})", "",
                  "| key | type | default | allowed | meaning |", "|---|---|---|---|---|"]
        for key, p in declared.items():
            allowed = p.check[1] if p.check else ""
            lines.append(f"| `{key}` | {p.kind.__name__} | `{p.default}` | {allowed} | {p.doc} |")
        lines.append("")
    return lines


if __name__ == "__main__":
    from trainers.trainer.registry import load_registry

    print(hyperparameters_markdown(load_registry()))
