"""Reading a hostile repository's file tree: resolving paths and walking folders."""
