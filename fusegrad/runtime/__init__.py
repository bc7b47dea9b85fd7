"""Running what was recorded: grad mode and the autograd engine."""
