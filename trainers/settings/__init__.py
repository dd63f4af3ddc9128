"""The ground floor of every setting: ``schema`` (``Param``, the one coercer and block checker).

Each trainer and reward signal declares its keys with ``Param`` here; the settings tree that reads
both config formats through those declarations sits above the trainers, in ``runner.settings``.
"""
