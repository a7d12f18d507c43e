"""Data: declared-support lists of other stacks (one JSON per stack and version); loaded by service.declared."""
