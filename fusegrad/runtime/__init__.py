"""Native execution: executors, plans and their drivers, kernel launches
(operand memory, layouts, threads) and the routines numpy is slow at."""
