"""Built-in scenes; each module holds one scene family (see ``academy.SCENES`` for the registry)."""
