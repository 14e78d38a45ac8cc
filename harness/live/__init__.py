"""Live runs: the runner, the tool loop, the modes, runtime checks."""
