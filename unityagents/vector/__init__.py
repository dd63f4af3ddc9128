"""Several environments behind one environment's interface.

``environment_set`` is the only place that knows a run has several environments; ``restart``
says when one of them counts as failed and launches it again; ``ray_backend`` puts them on a Ray
cluster; ``overlapped_stepping`` lets each step on its own clock.
"""
