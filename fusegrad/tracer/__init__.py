"""Turning Python into IR: ``fusegrad.jit``, the trace it records, the
numbers and sizes that vary between calls, the Python state it guards and
redoes, and the compiled programs it runs."""
