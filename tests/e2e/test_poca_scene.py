"""PushCollab, the cooperative scene: groups, group rewards and members that leave early, over gRPC."""
from __future__ import annotations

import numpy as np

from academy import load_scene
from academy.academy import Academy
from academy.brain import BrainConfig
from academy.envs.push_collab import AREAS, MEMBERS, PENALTY
from tests.conftest import free_port
from tests.step_view import InfoView
from unityagents import UnityEnvironment

BEHAVIOUR = "PushBlockCollab?team=0"
LEFT = 1


def test_the_scripted_team_scores_every_block():
    scene = load_scene("PushCollab")
    result = Academy(scene(0), {"PushCollabBrain": BrainConfig("heuristic")}).run_episodes(48)
    assert result["PushCollabBrain"] >= 5.0  # 1 + 2 + 3, less about ten steps of penalty


def test_groups_group_rewards_and_members_out_of_play_over_grpc():
    with InfoView(UnityEnvironment("PushCollab", base_port=free_port(), protocol="grpc", seed=0)) as env:
        info = env.reset()[BEHAVIOUR]
        assert info.group_id == [1 + k // MEMBERS for k in range(AREAS * MEMBERS)]
        fell_while_mates_play, group_rewards = 0, []
        for _ in range(3):  # everyone walks left: into the pit within three steps
            following = env.step({BEHAVIOUR: np.full((len(info.agents), 1), LEFT)})[BEHAVIOUR]
            group_rewards += [v for v, _ in env.stats.get("Academy/PushCollabBrain Group Reward", [])]
            rows = list(zip(following.agents, following.group_id, following.local_done, following.decision_requested,
                            following.rewards, following.group_rewards))
            # The penalty is the group's: every member that played the step pays it (a member back from
            # the pit for its group's next episode has not played yet: 0).
            assert all(r == 0.0 for *_, r, _ in rows)
            assert all(g == np.float32(-PENALTY) for _, _, done, _, _, g in rows if done)
            assert {float(g) for *_, g in rows} <= {float(np.float32(-PENALTY)), 0.0}
            # Groups whose episode goes on: a member played this step (it paid the penalty) and is not done.
            playing_on = {gid for _, gid, done, ask, _, g in rows if ask and not done and g != 0.0}
            left = [a for a, gid, done, *_ in rows if done and gid in playing_on]
            fell_while_mates_play += len(left)
            info = following
            if left:  # a member that left while its mates play on asks for no decision
                after = env.step({BEHAVIOUR: np.full((len(info.agents), 1), 2)})[BEHAVIOUR]
                asking = {a for a, ask in zip(after.agents, after.decision_requested) if ask}
                assert not asking & set(left)
                info = after
        assert fell_while_mates_play > 0
        # Each ended group episode reports its reward once: -PENALTY per step it lasted (at most 6 here).
        assert group_rewards and all(-6 * PENALTY - 1e-6 <= g <= -PENALTY + 1e-6 for g in group_rewards)
