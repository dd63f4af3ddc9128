"""The wire: one communicator per protocol, the only code that knows a protocol's bytes.

``base`` is the seam (the ``Communicator`` interface, the ``Peer`` it sees the environment
through, the registry of protocols, the limits on what arrives). API-2 (the 2018 socket protocol)
is ``api2`` (the exchange), ``api2_stream`` (the byte stream) and ``api2_messages`` (every field
checked); the modern protocol is ``grpc`` (the exchange), ``grpc_server`` (the gRPC server Unity
calls), ``grpc_messages`` (behaviours as brains: observations decoded, actions encoded) and
``validate`` (every field checked); ``side_channels`` carries the user's and the built-in side
channels; ``protos`` is the one copy of the generated messages, imported by the built-in Unity side
(``academy``) too. Nothing here imports the environment: a communicator sees it only as a Peer.
"""
