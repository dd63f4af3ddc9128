"""Side channels, under the names a script written for mlagents_envs 1.1 imports.

``mlagents_envs.side_channel.*`` (the package and each of its submodules) -> ``unityagents.side_channels``:
create a channel, pass it in ``UnityEnvironment(..., side_channels=[...])`` (the environment then
speaks the modern protocol), and queue messages; they travel with the next ``reset()`` or ``step()``::

    channel = EngineConfigurationChannel()
    env = UnityEnvironment("3DBall", side_channels=[channel])
    channel.set_configuration_parameters(time_scale=2.0)

The classes live in ``unityagents.wire.side_channels``, with the message format.
"""
from unityagents.wire.side_channels import (
    DefaultTrainingAnalyticsSideChannel,
    EngineConfig,
    EngineConfigurationChannel,
    EnvironmentParametersChannel,
    EnvironmentStats,
    FloatPropertiesChannel,
    IncomingMessage,
    OutgoingMessage,
    RawBytesChannel,
    SideChannel,
    SideChannelManager,
    StatList,
    StatsAggregationMethod,
    StatsSideChannel,
)

__all__ = ["DefaultTrainingAnalyticsSideChannel", "EngineConfig", "EngineConfigurationChannel",
           "EnvironmentParametersChannel", "EnvironmentStats", "FloatPropertiesChannel", "IncomingMessage",
           "OutgoingMessage", "RawBytesChannel", "SideChannel", "SideChannelManager", "StatList",
           "StatsAggregationMethod", "StatsSideChannel"]
