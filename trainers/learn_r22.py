"""``python -m trainers.learn_r22``, ``from trainers import learn_r22``: the front end lives in ``learn_r22``."""
import sys

import learn_r22

if __name__ == "__main__":
    learn_r22.cli()
else:
    sys.modules[__name__] = learn_r22
