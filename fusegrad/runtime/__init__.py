"""Running what was recorded and compiled: grad mode, the eager autograd
engine, jit and its programs, executors, plans and kernel launches."""
