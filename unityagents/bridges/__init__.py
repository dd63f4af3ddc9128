"""Other libraries' interfaces over an open environment: gymnasium (``gym``) and PettingZoo
(``pettingzoo``). They import their library on first use, so the rest of the package needs neither.
"""
