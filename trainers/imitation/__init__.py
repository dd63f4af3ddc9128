"""Learning from a teacher: the imitation trainer (a student brain copies a teacher brain live), and
behavioral cloning from ``.demo`` recordings beside PPO or SAC (``bc``).
"""
