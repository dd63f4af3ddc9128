"""What every trainer is: the interface the controller drives (``base``), the on- and off-policy
bases a trainer subclasses (``bases``), and the registry that finds trainer types through entry
points (``registry``).
"""
