"""Native execution: executors, plans and their drivers, kernel launches
(operand memory, layouts, threads) and the routines numpy is slow at."""

from .memory import keep_freed_memory

keep_freed_memory()
