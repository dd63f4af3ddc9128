"""The wire: one communicator per protocol, the only code that knows a protocol's bytes.

``api2`` (the 2018 socket protocol) and ``grpc`` (today's ML-Agents protocol) each turn an
environment's messages into ``BrainInfo`` and actions into messages; ``validate`` checks every field
of a modern message before use; ``side_channels`` carries the user's side channels; ``protos`` is the
one copy of the generated messages, imported by the built-in Unity side (``academy``) too. Nothing
here imports the environment: a communicator sees it only as a Peer (timeout, log, process).
"""
