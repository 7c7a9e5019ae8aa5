"""Reading a hostile repository's file tree (resolving paths, walking folders), and the
evaluator's own files and the folders it builds, which no one else may write."""
