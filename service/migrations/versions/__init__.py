"""Migration scripts of the results store, one per schema change, oldest first."""
